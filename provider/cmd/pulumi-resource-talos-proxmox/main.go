// Command pulumi-resource-talos-proxmox is the Pulumi plugin serving the TalosProxmoxCluster
// component.
package main

import (
	"context"
	"fmt"
	"os"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider"
)

func main() {
	prov, err := provider.Provider()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}

	if err := p.RunProvider(context.Background(), provider.Name, provider.Version, prov); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
