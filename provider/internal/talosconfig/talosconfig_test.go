package talosconfig

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/golden"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretstest"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// homelab is the cluster the examples describe: three control planes over two hosts behind a
// VIP, a Longhorn worker and a GPU worker.
func homelab() spec.Input {
	return spec.Input{
		ClusterName:  "homelab",
		TalosVersion: "v1.11.5",
		VIP:          "10.0.0.10",
		Network: spec.NetworkInput{
			Gateway:     "10.0.0.1",
			Nameservers: []string{"1.1.1.1", "9.9.9.9"},
			NTPServers:  []string{"time.cloudflare.com"},
		},
		Image:        spec.ImageInput{Extensions: []string{"siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools"}},
		NodeDefaults: spec.NodeDefaultsInput{Taints: []string{"example.com/pool=home:PreferNoSchedule"}},
		Nodes: map[string]spec.NodeInput{
			"cp-1": {HostNode: "pve1", Role: "controlplane", IP: "10.0.0.11", MACAddress: "bc:24:11:00:00:11"},
			"cp-2": {HostNode: "pve2", Role: "controlplane", IP: "10.0.0.12"},
			"cp-3": {HostNode: "pve1", Role: "controlplane", IP: "10.0.0.13"},
			"worker-1": {HostNode: "pve1", Role: "worker", IP: "10.0.0.21", Labels: map[string]string{"storage": "longhorn"},
				Taints:    []string{"example.com/pool=storage:NoSchedule"},
				DataDisks: []spec.DataDiskInput{{SizeGiB: 100, MountPath: "/var/lib/longhorn"}, {SizeGiB: 10}, {SizeGiB: 20, MountPath: "/var/mnt/scratch"}}},
			"worker-2": {HostNode: "pve2", Role: "worker", IP: "10.0.0.22", Taints: []string{"nvidia.com/gpu:NoSchedule"}, GPU: "nvidia",
				PCIDevices: []spec.PCIDeviceInput{{Mapping: "gpu"}}},
		},
	}
}

func dhcpCluster() spec.Input {
	return spec.Input{
		ClusterName:  "lab",
		TalosVersion: "v1.10.6",
		Network:      spec.NetworkInput{DHCP: new(true), Gateway: "10.0.0.1"},
		Nodes: map[string]spec.NodeInput{
			"solo": {HostNode: "pve", Role: "controlplane"},
		},
	}
}

// dualStackCluster has IPv4 and IPv6 on its cluster network, and workers with a bonded storage
// network (MTU 9000), a DHCP network on a VLAN and a routed one.
func dualStackCluster() spec.Input {
	storage := spec.NetworkDeviceInput{Bridge: "vmbr1", Bond: &spec.BondInput{MTU: new(9000)}}
	w1, w2 := storage, storage
	w1.Addresses = []string{"10.50.0.21/24"}
	w2.Addresses = []string{"10.50.0.22/24", "fd00:50::22/64"}
	w2.Bond = &spec.BondInput{Mode: "802.3ad", Interfaces: new(3), MTU: new(9000)}

	return spec.Input{
		ClusterName:  "dual",
		TalosVersion: "v1.11.5",
		VIP:          "10.0.0.10",
		Network: spec.NetworkInput{
			Gateway: "10.0.0.1", Gateway6: "fd00:1::1",
			PodSubnets:     []string{"10.244.0.0/16", "fd00:10:244::/56"},
			ServiceSubnets: []string{"10.96.0.0/12", "fd00:10:96::/112"},
		},
		Nodes: map[string]spec.NodeInput{
			"cp-1":     {HostNode: "pve1", Role: "controlplane", IP: "10.0.0.11", IP6: "fd00:1::11", MTU: new(1500)},
			"cp-2":     {HostNode: "pve2", Role: "controlplane", IP: "10.0.0.12", IP6: "fd00:1::12"},
			"cp-3":     {HostNode: "pve3", Role: "controlplane", IP: "10.0.0.13", IP6: "fd00:1::13"},
			"worker-1": {HostNode: "pve1", Role: "worker", IP: "10.0.0.21", IP6: "fd00:1::21", Networks: []spec.NetworkDeviceInput{{}, w1}},
			"worker-2": {HostNode: "pve2", Role: "worker", IP: "10.0.0.22", IP6: "fd00:1::22", Networks: []spec.NetworkDeviceInput{
				{MACAddress: "bc:24:11:00:00:22"}, w2,
				{Bridge: "vmbr2", VLANID: new(30), DHCP: new(true)},
				{Bridge: "vmbr3", Addresses: []string{"10.70.0.22/24"}, Gateway: "10.70.0.1", Routes: []string{"10.80.0.0/16"}, MTU: new(1400)},
			}},
		},
	}
}

// ipv6OnlyCluster has no IPv4 at all: an IPv6 VIP, IPv6 pods and services.
func ipv6OnlyCluster() spec.Input {
	return spec.Input{
		ClusterName:  "six",
		TalosVersion: "v1.11.5",
		VIP:          "fd00:1::10",
		Network: spec.NetworkInput{
			Gateway6: "fd00:1::1", PodSubnets: []string{"fd00:10:244::/56"}, ServiceSubnets: []string{"fd00:10:96::/112"},
		},
		Nodes: map[string]spec.NodeInput{
			"cp-1":     {HostNode: "pve1", Role: "controlplane", IP6: "fd00:1::11"},
			"worker-1": {HostNode: "pve1", Role: "worker", IP6: "fd00:1::21"},
		},
	}
}

type patchCase struct {
	name  string
	input spec.Input
	addrs func(c *spec.Cluster, n spec.Node) Addresses
}

func staticAddrs(c *spec.Cluster, n spec.Node) Addresses {
	var cps []string
	for _, cp := range c.ControlPlanes() {
		cps = append(cps, cp.IP)
	}

	return Addresses{NodeIP: n.IP, ControlPlaneIPs: cps, Endpoint: c.Endpoint}
}

// ciliumCluster is the homelab with Cilium as its CNI.
func ciliumCluster() spec.Input {
	in := homelab()
	in.Cilium = &spec.ChartPresetInput{}

	return in
}

var cases = []patchCase{
	{"homelab", homelab(), staticAddrs},
	{"cilium", ciliumCluster(), staticAddrs},
	{"secureboot", secureBootCluster(), staticAddrs},
	{"dualstack", dualStackCluster(), staticAddrs},
	{"ipv6only", ipv6OnlyCluster(), staticAddrs},
	{"dhcp", dhcpCluster(), func(*spec.Cluster, spec.Node) Addresses {
		return Addresses{NodeIP: "192.168.50.77", ControlPlaneIPs: []string{"192.168.50.77"}, Endpoint: "192.168.50.77"}
	}},
}

// contracts are the configuration contracts the patches are written for: the single v1alpha1
// document, the multi-document network of v1.12 and v1.13, the Kube* documents of v1.14.
var contracts = []string{"v1.11", "v1.12", "v1.13", "v1.14"}

// buildFor builds the case's cluster for a contract: from v1.14 data disks must be mounted where
// Talos mounts user volumes (/var/mnt/<name>), so other mount paths move there.
func buildFor(t *testing.T, in spec.Input, contract string) *spec.Cluster {
	t.Helper()

	c, err := spec.Build(in)
	if err != nil {
		t.Fatal(err)
	}

	if KubeDocuments(contract) {
		for i := range c.Nodes {
			n := &c.Nodes[i]
			n.DataDisks = slices.Clone(n.DataDisks)

			for j := range n.DataDisks {
				if p := n.DataDisks[j].MountPath; p != "" && !strings.HasPrefix(p, "/var/mnt/") {
					n.DataDisks[j].MountPath = "/var/mnt/" + VolumeName(p)
				}
			}
		}
	}

	return c
}

func goldenName(name, contract string) string {
	if contract == "v1.11" {
		return name + ".yaml"
	}

	return name + "-" + contract + ".yaml"
}

func TestNodePatchGolden(t *testing.T) {
	t.Parallel()

	for _, tc := range cases {
		for _, contract := range contracts {
			c := buildFor(t, tc.input, contract)

			var all strings.Builder
			for _, n := range c.Nodes {
				patch, err := NodePatch(c, n, tc.addrs(c, n), contract)
				if err != nil {
					t.Fatal(err)
				}

				again, _ := NodePatch(c, n, tc.addrs(c, n), contract)
				if again != patch {
					t.Fatalf("%s/%s: patch is not byte-stable", tc.name, n.Name)
				}

				all.WriteString("# " + n.Name + "\n" + patch + "---\n")
			}

			golden.Check(t, goldenName(tc.name, contract), all.String())
		}
	}
}

func TestManifestsPatchGolden(t *testing.T) {
	t.Parallel()

	empty, err := ManifestsPatch(nil, nil, "v1.13")
	if err != nil || empty != "" {
		t.Fatalf("empty manifests patch = %q, %v", empty, err)
	}

	patch, err := ManifestsPatch([]Manifest{{Name: "l2", Contents: "apiVersion: cilium.io/v2alpha1\nkind: CiliumL2AnnouncementPolicy\nmetadata:\n  name: default\n"}},
		[]string{"https://example.com/crds.yaml"}, "v1.13")
	if err != nil {
		t.Fatal(err)
	}

	golden.Check(t, "manifests.yaml", patch)
}

// TestPatchesValidateWithTalos generates every node's configuration in-process for each contract
// (Talos' own generation, the component's patches, a user patch) and reads back what Talos would
// configure, through Talos' own accessors — which read the old fields and the new documents alike.
func TestPatchesValidateWithTalos(t *testing.T) {
	t.Parallel()

	b := secretstest.Bundle()

	for _, tc := range cases {
		for _, contract := range contracts {
			c := buildFor(t, tc.input, contract)
			for _, n := range c.Nodes {
				checkNodeConfig(t, b, c, n, tc.addrs(c, n), contract, tc.name+"@"+contract+"/"+n.Name)
			}
		}
	}
}

func checkNodeConfig(t *testing.T, b *secrets.Bundle, c *spec.Cluster, n spec.Node, a Addresses, contract, at string) {
	t.Helper()

	nodePatch, err := NodePatch(c, n, a, contract)
	if err != nil {
		t.Fatal(err)
	}

	patches := []machineconfig.Patch{{From: "node", Text: nodePatch}, {From: "user", Text: "machine:\n  sysctls:\n    vm.max_map_count: \"262144\"\n"}}
	if n.Role == spec.RoleControlPlane {
		mp, _ := ManifestsPatch([]Manifest{{Name: "ns", Contents: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"}}, nil, contract)
		patches = append(patches, machineconfig.Patch{From: "manifests", Text: mp})
	}

	out, err := machineconfig.Generate(machineconfig.Request{
		ClusterName: c.Name, Endpoint: ClusterEndpoint(a.Endpoint), KubernetesVersion: c.KubernetesVersion,
		Contract: contract, ControlPlane: n.Role == spec.RoleControlPlane, Secrets: machineconfig.SecretsFrom(b), Patches: patches,
	})
	if err != nil {
		t.Fatalf("%s: %v", at, err)
	}

	cfg, err := configloader.NewFromBytes([]byte(out))
	if err != nil {
		t.Fatalf("%s: reading the generated configuration: %v", at, err)
	}

	if got := cfg.NetworkHostnameConfig().Hostname(); got != n.Name {
		t.Errorf("%s: hostname = %q", at, got)
	}

	if got := installerImage(cfg); got != c.ImageOf(n).InstallerImage {
		t.Errorf("%s: installer = %q, want the node's image's %q", at, got, c.ImageOf(n).InstallerImage)
	}

	checkNodeShape(t, cfg, c, n, at)

	if got := cfg.K8sNodeConfig().Labels()["topology.kubernetes.io/zone"]; got != n.HostNode {
		t.Errorf("%s: zone label = %q", at, got)
	}

	if KubeDocuments(contract) && n.Role != spec.RoleControlPlane {
		// From contract v1.14 the CNI and kube-proxy are control-plane documents only.
		checkNetwork(t, cfg, c, n, a, contract, at)

		return
	}

	flannel, proxy := cfg.K8sFlannelCNIConfig() != nil, cfg.K8sProxyConfig().Enabled()
	if c.Cilium && (flannel || proxy) {
		t.Errorf("%s: with Cilium, flannel = %v and kube-proxy enabled = %v; want neither", at, flannel, proxy)
	}

	if !c.Cilium && (!flannel || !proxy) {
		t.Errorf("%s: without Cilium, flannel = %v and kube-proxy enabled = %v; want both", at, flannel, proxy)
	}

	checkNetwork(t, cfg, c, n, a, contract, at)
}

// checkNodeShape checks, through Talos' accessors, the node's taints (with the control-plane
// taint Talos adds unless scheduling on control planes is allowed) and its GPU preset's kernel
// modules and sysctl.
func checkNodeShape(t *testing.T, cfg config.Config, c *spec.Cluster, n spec.Node, at string) {
	t.Helper()

	want := maps.Clone(n.Taints)
	if want == nil {
		want = map[string]string{}
	}

	if n.Role == spec.RoleControlPlane && !c.AllowSchedulingOnControlPlanes {
		want["node-role.kubernetes.io/control-plane"] = "NoSchedule"
	}

	if got := cfg.K8sNodeConfig().Taints(); len(got)+len(want) > 0 && !maps.Equal(got, want) {
		t.Errorf("%s: taints %v, want %v", at, got, want)
	}

	var modules []string
	for _, m := range cfg.KernelModuleConfigs() {
		modules = append(modules, m.Name())
	}

	gpu := n.GPU == spec.GPUNvidia
	if hasAll := len(modules) == len(spec.NvidiaKernelModules) && slices.Equal(modules, spec.NvidiaKernelModules); hasAll != gpu {
		t.Errorf("%s: kernel modules %v (GPU preset: %v)", at, modules, gpu)
	}

	if got := cfg.SysctlConfig()["net.core.bpf_jit_harden"]; (got == "1") != gpu {
		t.Errorf("%s: net.core.bpf_jit_harden = %q (GPU preset: %v)", at, got, gpu)
	}

	checkEncryption(t, cfg, n, at)
}
