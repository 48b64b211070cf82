// Command talos-homelab-go is a Pulumi Go program: a highly available Talos cluster on three
// Proxmox hosts (one control plane each), three control planes behind a VIP, a Longhorn worker and a GPU worker.
//
// Every site-specific value is stack configuration with a default, so the program runs
// unchanged on a real Proxmox cluster and in the local lab. Proxmox credentials are the
// proxmoxve provider's own stack config (proxmoxve:endpoint, proxmoxve:apiToken as a secret).
package main

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/talos-proxmox/pulumi-talos-proxmox/sdk/go/talosproxmox"
)

// l2Manifests announces LoadBalancer addresses on the LAN from the pool (seed 001's setup).
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

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		cfg := config.New(ctx, "")

		hosts := stringsOr(cfg, "hosts", []string{"pve1", "pve2", "pve3"})
		addrs := stringsOr(cfg, "addresses", []string{"192.168.10.11", "192.168.10.12", "192.168.10.13", "192.168.10.21", "192.168.10.22"})
		prefixLength := cfg.GetInt("prefixLength")
		if prefixLength == 0 {
			prefixLength = 24
		}

		cluster, err := talosproxmox.NewTalosProxmoxCluster(ctx, "homelab", &talosproxmox.TalosProxmoxClusterArgs{
			ClusterName:  "homelab",
			TalosVersion: or(cfg.Get("talosVersion"), "v1.13.9"),
			Vip:          pulumi.StringRef(or(cfg.Get("vip"), "192.168.10.10")),
			Network: &talosproxmox.NetworkArgs{
				Gateway:      pulumi.StringRef(or(cfg.Get("gateway"), "192.168.10.1")),
				PrefixLength: pulumi.IntRef(prefixLength),
				Nameservers:  stringsOr(cfg, "nameservers", []string{"1.1.1.1", "9.9.9.9"}),
				NtpServers:   stringsOr(cfg, "ntpServers", []string{"time.cloudflare.com"}),
			},
			Image: &talosproxmox.ImageArgs{
				FactoryUrl: pulumi.StringRef(or(cfg.Get("factoryUrl"), "https://factory.talos.dev")),
				Extensions: []string{"siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools"},
			},
			NodeDefaults: &talosproxmox.NodeDefaultsArgs{
				Cpu:       pulumi.IntRef(4),
				MemoryMib: pulumi.IntRef(8192),
				Tags:      []string{"homelab"},
			},
			Nodes: map[string]talosproxmox.NodeArgs{
				"cp-1": {HostNode: hosts[0], Role: "controlplane", Ip: pulumi.StringRef(addrs[0])},
				"cp-2": {HostNode: hosts[1], Role: "controlplane", Ip: pulumi.StringRef(addrs[1])},
				"cp-3": {HostNode: hosts[2], Role: "controlplane", Ip: pulumi.StringRef(addrs[2])},
				"storage-1": {
					HostNode:  hosts[0],
					Role:      "worker",
					Ip:        pulumi.StringRef(addrs[3]),
					Labels:    map[string]string{"node.longhorn.io/create-default-disk": "true"},
					DataDisks: []talosproxmox.DataDiskArgs{{SizeGib: 200, MountPath: pulumi.StringRef("/var/lib/longhorn")}},
				},
				"gpu-1": {
					HostNode:   hosts[1],
					Role:       "worker",
					Ip:         pulumi.StringRef(addrs[4]),
					MemoryMib:  pulumi.IntRef(16384),
					Labels:     map[string]string{"nvidia.com/gpu.present": "true"},
					PciDevices: []talosproxmox.PciDeviceArgs{{Mapping: pulumi.StringRef("gpu")}},
				},
			},
			// Cilium as the CNI, rendered into the control planes' configuration with the Talos values.
			Cilium: &talosproxmox.CiliumArgs{
				Version:    pulumi.StringRef("1.18.0"),
				Repository: pulumi.StringRef(or(cfg.Get("ciliumRepository"), "https://helm.cilium.io")),
				Values: map[string]interface{}{
					"l2announcements": map[string]interface{}{"enabled": true},
					"hubble": map[string]interface{}{
						"relay": map[string]interface{}{"enabled": true},
						"ui":    map[string]interface{}{"enabled": true},
					},
				},
			},
			InlineManifests: []talosproxmox.InlineManifestArgs{{
				Name:     "cilium-l2",
				Contents: pulumi.String(fmt.Sprintf(l2Manifests, or(cfg.Get("loadBalancerPool"), "192.168.10.240/28"))),
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
	})
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
