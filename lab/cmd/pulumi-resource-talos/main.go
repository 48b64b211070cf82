// Command pulumi-resource-talos is the lab's stand-in for the pulumiverse talos provider v0.7.1
// (see lab/talosstandin). It is built for the local lab only and never shipped as the real one.
package main

import (
	"context"
	"fmt"
	"os"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosstandin"
)

func main() {
	prov, err := talosstandin.New()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}

	if err := p.RunProvider(context.Background(), "talos", "0.7.1", prov); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
