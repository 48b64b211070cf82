// Command pulumi-resource-proxmoxve is the lab-only stand-in for the published pulumi-proxmoxve
// v7.13.0 resource plugin: the real bpg Terraform provider served through
// pulumi-terraform-bridge under the published schema (see package proxmoxve). It is built for the
// local lab only and never shipped.
package main

import (
	"context"
	"fmt"
	"os"

	pftfbridge "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfbridge"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/proxmoxve"
)

func main() {
	ctx := context.Background()

	info, err := proxmoxve.Info(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}

	pftfbridge.MainWithMuxer(ctx, proxmoxve.Package, info, proxmoxve.Schema)
}
