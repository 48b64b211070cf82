package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/talos-proxmox/pulumi-talos-proxmox/sdk/go/talosproxmox"
)

// component is the 3-control-plane cluster of BenchmarkPreview through the component, as
// examples/go writes it: the cluster handwritten writes out by hand.
func component(ctx *pulumi.Context) error {
	cfg := config.New(ctx, "")

	var addrs []string
	cfg.RequireObject("addresses", &addrs)

	cluster, err := talosproxmox.NewTalosProxmoxCluster(ctx, "bench", &talosproxmox.TalosProxmoxClusterArgs{
		ClusterName:  "bench",
		TalosVersion: "v1.11.5",
		Vip:          pulumi.StringRef(cfg.Require("vip")),
		Network:      &talosproxmox.NetworkArgs{Gateway: pulumi.StringRef(cfg.Require("gateway"))},
		Image:        &talosproxmox.ImageArgs{FactoryUrl: pulumi.StringRef(cfg.Require("factoryUrl"))},
		Nodes: map[string]talosproxmox.NodeArgs{
			"cp-1": {HostNode: "pve1", Role: "controlplane", Ip: pulumi.StringRef(addrs[0]), VmId: pulumi.IntRef(900)},
			"cp-2": {HostNode: "pve2", Role: "controlplane", Ip: pulumi.StringRef(addrs[1]), VmId: pulumi.IntRef(901)},
			"cp-3": {HostNode: "pve1", Role: "controlplane", Ip: pulumi.StringRef(addrs[2]), VmId: pulumi.IntRef(902)},
		},
	})
	if err != nil {
		return err
	}

	ctx.Export("endpoint", cluster.Endpoint)
	ctx.Export("kubeconfig", cluster.Kubeconfig)
	ctx.Export("talosconfig", cluster.Talosconfig)

	return nil
}
