package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider"
)

// program is the inline Pulumi program of one cluster's stack: the TalosProxmoxCluster component,
// run in-process, with the cluster's inventory entry as its inputs.
func program(c Cluster) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		cluster, err := provider.NewTalosProxmoxCluster(ctx, c.Name, clusterArgs(c))
		if err != nil {
			return err
		}

		ctx.Export("endpoint", cluster.Endpoint)
		ctx.Export("kubeconfig", cluster.Kubeconfig)
		ctx.Export("talosconfig", cluster.Talosconfig)

		return nil
	}
}

// clusterArgs maps an inventory entry to the component's inputs; what the entry leaves empty
// takes the component's defaults.
func clusterArgs(c Cluster) provider.TalosProxmoxClusterArgs {
	nodes := make(map[string]provider.Node, len(c.Nodes))
	for name, n := range c.Nodes {
		nodes[name] = provider.Node{
			HostNode:    n.HostNode,
			Role:        n.Role,
			Ip:          n.IP,
			Cpu:         positive(n.CPU),
			MemoryMib:   positive(n.MemoryMib),
			DiskSizeGib: positive(n.DiskSizeGib),
		}
	}

	args := provider.TalosProxmoxClusterArgs{
		ClusterName:       c.Name,
		TalosVersion:      c.TalosVersion,
		KubernetesVersion: c.KubernetesVersion,
		Vip:               c.Vip,
		Nodes:             nodes,
		Network: &provider.Network{
			Gateway:      c.Network.Gateway,
			PrefixLength: positive(c.Network.PrefixLength),
			Nameservers:  c.Network.Nameservers,
		},
		Image: &provider.Image{FactoryUrl: c.Image.FactoryURL, Extensions: c.Image.Extensions},
	}

	if c.Cilium != nil {
		args.Cilium = &provider.Cilium{Version: c.Cilium.Version, Repository: c.Cilium.Repository}
	}

	return args
}

// positive is nil for zero (unset: the component's default) and a pointer to v otherwise.
func positive(v int) *int {
	if v == 0 {
		return nil
	}

	return &v
}
