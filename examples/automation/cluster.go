package main

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider"
)

// l2Manifests announces LoadBalancer addresses from the pool on the LAN (seed 001's setup).
const l2Manifests = `apiVersion: cilium.io/v2alpha1
kind: CiliumL2AnnouncementPolicy
metadata:
  name: external
spec:
  loadBalancerIPs: true
  interfaces: ["^e.*"]
  nodeSelector:
    matchExpressions:
      - key: node-role.kubernetes.io/control-plane
        operator: DoesNotExist
---
apiVersion: cilium.io/v2alpha1
kind: CiliumLoadBalancerIPPool
metadata:
  name: external
spec:
  blocks:
    - cidr: %s
`

// program is the cluster of one stack: three control planes over three Proxmox hosts behind a
// VIP, a Longhorn worker and a GPU worker. Site values come from stack config.
func program(ctx *pulumi.Context) error {
	cfg := config.New(ctx, "")

	hosts := stringsOr(cfg, "hosts", []string{"pve1", "pve2", "pve3"})
	addrs := stringsOr(cfg, "addresses", []string{"192.168.10.11", "192.168.10.12", "192.168.10.13", "192.168.10.21", "192.168.10.22"})
	talosVersion := or(cfg.Get("talosVersion"), "v1.13.9")
	prefixLength := cfg.GetInt("prefixLength")
	if prefixLength == 0 {
		prefixLength = 24
	}

	nodes := map[string]provider.Node{
		"cp-1": {HostNode: hosts[0], Role: "controlplane", Ip: addrs[0]},
		"cp-2": {HostNode: hosts[1], Role: "controlplane", Ip: addrs[1]},
		"cp-3": {HostNode: hosts[2], Role: "controlplane", Ip: addrs[2]},
		"storage-1": {
			HostNode: hosts[0], Role: "worker", Ip: addrs[3],
			Labels:    map[string]string{"node.longhorn.io/create-default-disk": "true"},
			DataDisks: []provider.DataDisk{{SizeGib: 200, MountPath: "/var/lib/longhorn"}},
		},
		"gpu-1": {
			HostNode: hosts[1], Role: "worker", Ip: addrs[4], MemoryMib: ptr(16384),
			Labels:     map[string]string{"nvidia.com/gpu.present": "true"},
			PciDevices: []provider.PciDevice{{Mapping: "gpu"}},
		},
	}

	// Scale out with plain workers: one per address in `workerAddresses`, spread over the hosts.
	for i, ip := range stringsOr(cfg, "workerAddresses", nil) {
		nodes[fmt.Sprintf("worker-%d", i+1)] = provider.Node{HostNode: hosts[i%len(hosts)], Role: "worker", Ip: ip}
	}

	cluster, err := provider.NewTalosProxmoxCluster(ctx, ctx.Stack(), provider.TalosProxmoxClusterArgs{
		ClusterName:  ctx.Stack(),
		TalosVersion: talosVersion,
		Vip:          or(cfg.Get("vip"), "192.168.10.10"),
		Network: &provider.Network{
			Gateway:      or(cfg.Get("gateway"), "192.168.10.1"),
			PrefixLength: &prefixLength,
			Nameservers:  stringsOr(cfg, "nameservers", []string{"1.1.1.1", "9.9.9.9"}),
			NtpServers:   stringsOr(cfg, "ntpServers", []string{"time.cloudflare.com"}),
		},
		Image: &provider.Image{
			FactoryUrl: or(cfg.Get("factoryUrl"), "https://factory.talos.dev"),
			Extensions: []string{"siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools"},
		},
		NodeDefaults: &provider.NodeDefaults{Cpu: ptr(4), MemoryMib: ptr(8192), Tags: []string{"homelab"}},
		Nodes:        nodes,
		// Cilium as the CNI, rendered into the control planes' configuration with the Talos values.
		Cilium: &provider.Cilium{
			Version:    "1.18.0",
			Repository: or(cfg.Get("ciliumRepository"), "https://helm.cilium.io"),
			Values: map[string]any{
				"l2announcements": map[string]any{"enabled": true},
				"hubble": map[string]any{
					"relay": map[string]any{"enabled": true},
					"ui":    map[string]any{"enabled": true},
				},
			},
		},
		InlineManifests: []provider.InlineManifest{{
			Name:     "cilium-l2",
			Contents: pulumi.Sprintf(l2Manifests, or(cfg.Get("loadBalancerPool"), "192.168.10.240/28")),
		}},
	})
	if err != nil {
		return err
	}

	ctx.Export("endpoint", cluster.Endpoint)
	ctx.Export("kubeconfig", cluster.Kubeconfig)
	ctx.Export("talosconfig", cluster.Talosconfig)
	ctx.Export("nodes", cluster.Nodes)

	return nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}

	return v
}

func stringsOr(cfg *config.Config, key string, def []string) []string {
	var v []string
	if err := cfg.TryObject(key, &v); err != nil || len(v) == 0 {
		return def
	}

	return v
}

func ptr[T any](v T) *T { return &v }
