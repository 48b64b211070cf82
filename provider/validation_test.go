package provider

import (
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// homelabArgs is a valid cluster; each bad-input case breaks one thing.
func homelabArgs() TalosProxmoxClusterArgs {
	return TalosProxmoxClusterArgs{
		ClusterName:  "homelab",
		TalosVersion: "v1.11.5",
		Vip:          "10.0.0.10",
		Network:      &Network{Gateway: "10.0.0.1"},
		Nodes: map[string]Node{
			"cp-1":     {HostNode: "pve1", Role: "controlplane", Ip: "10.0.0.11", VmId: new(111), MacAddress: "BC:24:11:00:00:11"},
			"cp-2":     {HostNode: "pve2", Role: "controlplane", Ip: "10.0.0.12", VmId: new(112)},
			"cp-3":     {HostNode: "pve1", Role: "controlplane", Ip: "10.0.0.13"},
			"worker-1": {HostNode: "pve1", Role: "worker", Ip: "10.0.0.21", DataDisks: []DataDisk{{SizeGib: 50, MountPath: "/var/lib/longhorn"}}},
			"worker-2": {HostNode: "pve2", Role: "worker", Ip: "10.0.0.22", PciDevices: []PciDevice{{Mapping: "gpu"}}},
		},
	}
}

// dualStack gives every node of the homelab an IPv6 address, then makes mistake f.
func dualStack(f func(*TalosProxmoxClusterArgs)) func(*TalosProxmoxClusterArgs) {
	return func(a *TalosProxmoxClusterArgs) {
		a.Network.Gateway6 = "fd00:1::1"
		a.Network.PodSubnets = []string{"10.244.0.0/16", "fd00:10:244::/56"}
		a.Network.ServiceSubnets = []string{"10.96.0.0/12", "fd00:10:96::/112"}

		for name, n := range a.Nodes {
			n.Ip6 = "fd00:1::" + strings.TrimPrefix(n.Ip, "10.0.0.")
			a.Nodes[name] = n
		}

		f(a)
	}
}

// ipv6Only makes the homelab IPv6-only, then makes mistake f.
func ipv6Only(f func(*TalosProxmoxClusterArgs)) func(*TalosProxmoxClusterArgs) {
	return dualStack(func(a *TalosProxmoxClusterArgs) {
		a.Network.Gateway, a.Vip = "", "fd00:1::10"
		a.Network.PodSubnets, a.Network.ServiceSubnets = []string{"fd00:10:244::/56"}, []string{"fd00:10:96::/112"}

		for name, n := range a.Nodes {
			n.Ip = ""
			a.Nodes[name] = n
		}

		f(a)
	})
}

// storage gives worker-1 a second network (vmbr1, 10.50.0.21/24) that f then breaks.
func storage(f func(*NodeNetwork)) func(*TalosProxmoxClusterArgs) {
	return onNode("worker-1", func(n *Node) {
		nw := NodeNetwork{Bridge: "vmbr1", Addresses: []string{"10.50.0.21/24"}}
		f(&nw)
		n.Networks = []NodeNetwork{{}, nw}
	})
}

func node(a *TalosProxmoxClusterArgs, name string, f func(*Node)) {
	n := a.Nodes[name]
	f(&n)
	a.Nodes[name] = n
}

// onNode is the mistake f makes in node name.
func onNode(name string, f func(*Node)) func(*TalosProxmoxClusterArgs) {
	return func(a *TalosProxmoxClusterArgs) { node(a, name, f) }
}

// withHelmChart is the mistake of a cluster whose one Helm chart is c.
func withHelmChart(c HelmChart) func(*TalosProxmoxClusterArgs) {
	return func(a *TalosProxmoxClusterArgs) { a.HelmCharts = []HelmChart{c} }
}

// withImage is the mistake of a cluster whose image is i.
func withImage(i Image) func(*TalosProxmoxClusterArgs) {
	return func(a *TalosProxmoxClusterArgs) { a.Image = &i }
}

// withCilium is the mistake of a cluster whose Cilium is c.
func withCilium(c Cilium) func(*TalosProxmoxClusterArgs) {
	return func(a *TalosProxmoxClusterArgs) { a.Cilium = &c }
}

type mockMonitor struct {
	mu    sync.Mutex
	names []string
	files []string
}

func (m *mockMonitor) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	m.names = append(m.names, args.TypeToken+"::"+args.Name)
	if args.TypeToken == "proxmoxve:Download/file:File" {
		m.files = append(m.files, args.Inputs["nodeName"].StringValue()+"/"+args.Inputs["fileName"].StringValue())
	}
	m.mu.Unlock()

	out := args.Inputs.Copy()
	if args.TypeToken == "talos:machine/secrets:Secrets" {
		// Real secrets: the component generates real configurations from them.
		out["machineSecrets"] = resource.ToResourcePropertyValue(mockMachineSecrets())
	}

	return args.Name + "-id", out, nil
}

func (m *mockMonitor) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

func (m *mockMonitor) fileNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()

	return append([]string{}, m.files...)
}

// runWith runs a Go program that constructs clusters through the given function.
func runWith(m *mockMonitor, program func(func(string, TalosProxmoxClusterArgs) error) error) error {
	return pulumi.RunErr(func(ctx *pulumi.Context) error {
		return program(func(name string, args TalosProxmoxClusterArgs) error {
			_, err := NewTalosProxmoxCluster(ctx, name, args)
			return err
		})
	}, pulumi.WithMocks("project", "stack", m))
}

// runArgs constructs the component from Go, as a Go program using it as a library does.
func runArgs(args TalosProxmoxClusterArgs) ([]string, error) {
	m := &mockMonitor{}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		_, err := NewTalosProxmoxCluster(ctx, "homelab", args)
		return err
	}, pulumi.WithMocks("project", "stack", m))

	return m.names, err
}

// badInput is an input mistake: how to make it, the property path the error must name and a word
// of what to do.
type badInput struct {
	name   string
	mutate func(*TalosProxmoxClusterArgs)
	path   string // the property path the error must name
	hint   string // a word of what to do
}

var badInputs = []badInput{
	{"no cluster name", func(a *TalosProxmoxClusterArgs) { a.ClusterName = "" }, "clusterName:", "required"},
	{"cluster name not a DNS label", func(a *TalosProxmoxClusterArgs) { a.ClusterName = "Home_Lab" }, "clusterName:", "DNS label"},
	{"cluster name too long", func(a *TalosProxmoxClusterArgs) { a.ClusterName = strings.Repeat("a", 64) }, "clusterName:", "63"},
	{"no talos version", func(a *TalosProxmoxClusterArgs) { a.TalosVersion = "" }, "talosVersion:", "v1.10.0 to v1.14.x"},
	{"talos version malformed", func(a *TalosProxmoxClusterArgs) { a.TalosVersion = "1.11" }, "talosVersion:", "v1.11.5"},
	{"talos version too new", func(a *TalosProxmoxClusterArgs) { a.TalosVersion = "v1.15.0" }, "talosVersion:", "v1.10.0 to v1.14.x"},
	{"kubernetes too old for talos 1.13", func(a *TalosProxmoxClusterArgs) { a.TalosVersion, a.KubernetesVersion = "v1.13.9", "v1.30.4" },
		"kubernetesVersion:", "v1.31 to v1.36"},
	{"kubernetes too new for talos 1.12", func(a *TalosProxmoxClusterArgs) { a.TalosVersion, a.KubernetesVersion = "v1.12.4", "v1.36.0" },
		"kubernetesVersion:", "v1.30 to v1.35"},
	{"config contract malformed", func(a *TalosProxmoxClusterArgs) { a.ConfigContract = "1.13" }, "configContract:", "v1.13"},
	{"config contract newer than talos", func(a *TalosProxmoxClusterArgs) { a.TalosVersion, a.ConfigContract = "v1.12.4", "v1.13" },
		"configContract:", "at most v1.12"},
	{"config contract unknown", func(a *TalosProxmoxClusterArgs) { a.ConfigContract = "v1.9" }, "configContract:", "v1.10 to v1.14"},
	{"talos version too old", func(a *TalosProxmoxClusterArgs) { a.TalosVersion = "v1.9.5" }, "talosVersion:", "supported"},
	{"kubernetes version malformed", func(a *TalosProxmoxClusterArgs) { a.KubernetesVersion = "latest" }, "kubernetesVersion:", "v1.34.1"},
	{"kubernetes version unsupported", func(a *TalosProxmoxClusterArgs) { a.KubernetesVersion = "v1.36.0" }, "kubernetesVersion:", "v1.29 to v1.34"},
	{"no nodes", func(a *TalosProxmoxClusterArgs) { a.Nodes = nil }, "nodes:", "controlplane"},
	{"no control plane", func(a *TalosProxmoxClusterArgs) {
		for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
			delete(a.Nodes, n)
		}
		a.Vip = ""
	}, "nodes:", "has no control plane"},
	{"node name not a DNS label", func(a *TalosProxmoxClusterArgs) {
		a.Nodes["Worker_3"] = Node{HostNode: "pve1", Role: "worker", Ip: "10.0.0.23"}
	}, "nodes.Worker_3:", "DNS label"},
	{"unknown role", onNode("cp-2", func(n *Node) { n.Role = "master" }), "nodes.cp-2.role:", "controlplane"},
	{"missing role", onNode("worker-1", func(n *Node) { n.Role = "" }), "nodes.worker-1.role:", "required"},
	{"missing host node", onNode("cp-1", func(n *Node) { n.HostNode = "" }), "nodes.cp-1.hostNode:", "Proxmox host"},
	{"bad host node", onNode("cp-1", func(n *Node) { n.HostNode = "pve 1" }), "nodes.cp-1.hostNode:", "pve1"},
	{"bad ip", onNode("cp-1", func(n *Node) { n.Ip = "10.0.0.300" }), "nodes.cp-1.ip:", "IPv4"},
	{"ipv6 ip", onNode("cp-1", func(n *Node) { n.Ip = "fd00::11" }), "nodes.cp-1.ip:", "IPv4"},
	{"duplicate ip", onNode("cp-2", func(n *Node) { n.Ip = "10.0.0.11" }), "nodes.cp-2.ip:", "nodes.cp-1"},
	{"ip outside subnet", onNode("worker-1", func(n *Node) { n.Ip = "10.0.1.21" }), "nodes.worker-1.ip:", "10.0.0.0/24"},
	{"ip is the gateway", onNode("worker-1", func(n *Node) { n.Ip = "10.0.0.1" }), "nodes.worker-1.ip:", "gateway"},
	{"ip is broadcast", onNode("worker-1", func(n *Node) { n.Ip = "10.0.0.255" }), "nodes.worker-1.ip:", "broadcast"},
	{"static without ip", onNode("worker-2", func(n *Node) { n.Ip = "" }), "nodes.worker-2.ip:", "dhcp"},
	{"static without gateway", func(a *TalosProxmoxClusterArgs) { a.Network.Gateway = "" }, "network.gateway:", "required"},
	{"bad gateway", func(a *TalosProxmoxClusterArgs) { a.Network.Gateway = "router" }, "network.gateway:", "IPv4"},
	{"bad prefix length", func(a *TalosProxmoxClusterArgs) { a.Network.PrefixLength = new(33) }, "network.prefixLength:", "1 to 32"},
	{"vip equals a node ip", func(a *TalosProxmoxClusterArgs) { a.Vip = "10.0.0.12" }, "vip:", "nodes.cp-2"},
	{"vip outside subnet", func(a *TalosProxmoxClusterArgs) { a.Vip = "192.168.1.10" }, "vip:", "subnet"},
	{"vip malformed", func(a *TalosProxmoxClusterArgs) { a.Vip = "10.0.0" }, "vip:", "IPv4"},
	{"multicast vip", func(a *TalosProxmoxClusterArgs) { a.Network = &Network{Dhcp: new(true)}; a.Vip = "224.0.0.1" }, "vip:", "unicast"},
	{"pod subnet overlaps the nodes", func(a *TalosProxmoxClusterArgs) { a.Network.PodSubnets = []string{"10.0.0.0/16"} }, "network.podSubnets[0]:", "node subnet"},
	{"service subnet overlaps the pods", func(a *TalosProxmoxClusterArgs) {
		a.Network.PodSubnets = []string{"10.96.0.0/16"}
	}, "network.serviceSubnets[0]:", "pod subnet"},
	{"mount path hides Talos' directories", onNode("worker-1", func(n *Node) { n.DataDisks[0].MountPath = "/var/lib" }),
		"nodes.worker-1.dataDisks[0].mountPath:", "would hide"},
	{"duplicate vm id", onNode("cp-3", func(n *Node) { n.VmId = new(111) }), "nodes.cp-3.vmId:", "nodes.cp-1"},
	{"vm id too small", onNode("cp-3", func(n *Node) { n.VmId = new(99) }), "nodes.cp-3.vmId:", "100"},
	{"bad mac", onNode("cp-2", func(n *Node) { n.MacAddress = "BC:24:11" }), "nodes.cp-2.macAddress:", "BC:24:11:00:00:01"},
	{"multicast mac", onNode("cp-2", func(n *Node) { n.MacAddress = "01:00:5E:00:00:01" }), "nodes.cp-2.macAddress:", "unicast"},
	{"duplicate mac", onNode("cp-2", func(n *Node) { n.MacAddress = "bc:24:11:00:00:11" }), "nodes.cp-2.macAddress:", "nodes.cp-1"},
	{"control plane with 1 cpu", onNode("cp-1", func(n *Node) { n.Cpu = new(1) }), "nodes.cp-1.cpu:", "2 or more"},
	{"control plane with 1 GiB", onNode("cp-1", func(n *Node) { n.MemoryMib = new(1024) }), "nodes.cp-1.memoryMib:", "2048"},
	{"worker with 512 MiB", onNode("worker-1", func(n *Node) { n.MemoryMib = new(512) }), "nodes.worker-1.memoryMib:", "1024"},
	{"memory from node defaults", func(a *TalosProxmoxClusterArgs) { a.NodeDefaults = &NodeDefaults{MemoryMib: new(1536)} }, "nodes.cp-1.memoryMib:", "from nodeDefaults.memoryMib"},
	{"os disk too small", onNode("cp-1", func(n *Node) { n.DiskSizeGib = new(5) }), "nodes.cp-1.diskSizeGib:", "10"},
	{"dhcp without a gateway", func(a *TalosProxmoxClusterArgs) {
		a.Network.Dhcp = new(true)
		a.Network.Gateway = ""
		a.Vip = ""
		for k, n := range a.Nodes {
			n.Ip = ""
			a.Nodes[k] = n
		}
	}, "network.gateway:", "siderolabs/talos#11651"},
	{"dhcp on a subnet too large to scan", func(a *TalosProxmoxClusterArgs) {
		a.Network.Dhcp = new(true)
		a.Network.PrefixLength = new(16)
		a.Vip = ""
		for k, n := range a.Nodes {
			n.Ip = ""
			a.Nodes[k] = n
		}
	}, "network.prefixLength:", "/20"},
	{"dhcp with a static ip", func(a *TalosProxmoxClusterArgs) { a.Network.Dhcp = new(true) }, "nodes.cp-1.ip:", "DHCP"},
	{"unparseable patch", func(a *TalosProxmoxClusterArgs) { a.ConfigPatches = pulumi.ToStringArray([]string{"machine: [\n"}) }, "configPatches[0]:", "patch"},
	{"patch with an unknown field", func(a *TalosProxmoxClusterArgs) {
		a.ConfigPatches = pulumi.ToStringArray([]string{"machine:\n  netwrk:\n    hostname: x\n"})
	}, "configPatches[0]:", "netwrk"},
	{"empty patch", func(a *TalosProxmoxClusterArgs) { a.WorkerConfigPatches = pulumi.ToStringArray([]string{"  "}) }, "workerConfigPatches[0]:", "empty"},
	{"bad control plane patch", func(a *TalosProxmoxClusterArgs) {
		a.ControlPlaneConfigPatches = pulumi.ToStringArray([]string{"ok: 1\n", "[{\"op\": \"jump\"}]"})
	}, "controlPlaneConfigPatches[", "patch"},
	{"bad node patch (secret)", func(a *TalosProxmoxClusterArgs) {
		node(a, "worker-1", func(n *Node) {
			n.ConfigPatches = pulumi.StringArray{pulumi.ToSecret(pulumi.String("{{")).(pulumi.StringOutput)}
		})
	}, "nodes.worker-1.configPatches[0]:", "patch"},
	{"relative mount path", onNode("worker-1", func(n *Node) { n.DataDisks[0].MountPath = "var/lib/longhorn" }), "nodes.worker-1.dataDisks[0].mountPath:", "absolute"},
	{"mount path outside /var", onNode("worker-1", func(n *Node) { n.DataDisks[0].MountPath = "/mnt/data" }), "nodes.worker-1.dataDisks[0].mountPath:", "/var"},
	{"mount path in etcd's directory", onNode("worker-1", func(n *Node) { n.DataDisks[0].MountPath = "/var/lib/etcd/data" }),
		"nodes.worker-1.dataDisks[0].mountPath:", "Talos itself uses"},
	{"unclean mount path", onNode("worker-1", func(n *Node) { n.DataDisks[0].MountPath = "/var/lib/../longhorn/" }), "nodes.worker-1.dataDisks[0].mountPath:", "clean"},
	{"duplicate mount path", onNode("worker-1", func(n *Node) { n.DataDisks = append(n.DataDisks, DataDisk{SizeGib: 5, MountPath: "/var/lib/longhorn"}) }),
		"nodes.worker-1.dataDisks[1].mountPath:", "dataDisks[0]"},
	{"zero-size data disk", onNode("worker-1", func(n *Node) { n.DataDisks[0].SizeGib = 0 }), "nodes.worker-1.dataDisks[0].sizeGib:", "1 or more"},
	{"pci mapping and id", onNode("worker-2", func(n *Node) { n.PciDevices[0].Id = "0000:01:00.0" }), "nodes.worker-2.pciDevices[0]:", "only one"},
	{"pci neither mapping nor id", onNode("worker-2", func(n *Node) { n.PciDevices[0].Mapping = "" }), "nodes.worker-2.pciDevices[0]:", "neither"},
	{"pci id malformed", onNode("worker-2", func(n *Node) { n.PciDevices[0] = PciDevice{Id: "gpu0"} }), "nodes.worker-2.pciDevices[0].id:", "0000:01:00.0"},
	{"pcie on the pc machine", func(a *TalosProxmoxClusterArgs) {
		a.NodeDefaults = &NodeDefaults{VmMachine: "pc"}
		node(a, "worker-2", func(n *Node) { n.PciDevices[0].Pcie = new(true) })
	}, "nodes.worker-2.pciDevices[0].pcie:", "q35"},
	{"bad label key", onNode("cp-1", func(n *Node) { n.Labels = map[string]string{"-bad": "x"} }), "nodes.cp-1.labels:", "label name"},
	{"restricted label on a worker", onNode("worker-1", func(n *Node) { n.Labels = map[string]string{"node-role.kubernetes.io/worker": ""} }),
		"nodes.worker-1.labels:", "NodeRestriction"},
	{"reserved label", onNode("cp-1", func(n *Node) { n.Labels = map[string]string{"topology.kubernetes.io/zone": "a"} }), "nodes.cp-1.labels:", "proxmoxClusterName"},
	{"taint without an effect", onNode("worker-1", func(n *Node) { n.Taints = []string{"dedicated=storage"} }), "nodes.worker-1.taints[0]:", "has no effect"},
	{"taint with an unknown effect", onNode("worker-1", func(n *Node) { n.Taints = []string{"dedicated=storage:Evict"} }), "nodes.worker-1.taints[0]:",
		"not one of NoSchedule, PreferNoSchedule, NoExecute"},
	{"taint effect in the wrong case", onNode("worker-1", func(n *Node) { n.Taints = []string{"dedicated:noschedule"} }), "nodes.worker-1.taints[0]:", "case-sensitive: NoSchedule"},
	{"taint with a bad key", onNode("worker-1", func(n *Node) { n.Taints = []string{"-x=y:NoSchedule"} }), "nodes.worker-1.taints[0]:", "taint name"},
	{"taint key twice", onNode("worker-1", func(n *Node) { n.Taints = []string{"a=b:NoSchedule", "a:NoExecute"} }), "nodes.worker-1.taints[1]:", "one taint per key"},
	{"a node controller's taint", onNode("worker-1", func(n *Node) { n.Taints = []string{"node.kubernetes.io/unschedulable:NoSchedule"} }),
		"nodes.worker-1.taints[0]:", "node controller"},
	{"the control-plane taint", onNode("cp-1", func(n *Node) { n.Taints = []string{"node-role.kubernetes.io/control-plane:NoSchedule"} }), "nodes.cp-1.taints[0]:",
		"allowSchedulingOnControlPlanes"},
	{"a reserved manifest name", func(a *TalosProxmoxClusterArgs) {
		a.InlineManifests = []InlineManifest{{Name: "nvidia-runtimeclass", Contents: pulumi.String("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n")}}
	}, "inlineManifests[0].name:", "makes itself"},
	{"gpu without a pci device", onNode("worker-1", func(n *Node) { n.Gpu = "nvidia" }), "nodes.worker-1.gpu:", "pciDevices"},
	{"unknown gpu preset", onNode("worker-2", func(n *Node) { n.Gpu = "amd" }), "nodes.worker-2.gpu:", "\"nvidia\""},
	{"gpu on a schematic without its extensions", onNode("worker-2", func(n *Node) {
		n.Gpu = "nvidia"
		n.Image = &NodeImage{Schematic: "customization:\n  systemExtensions:\n    officialExtensions: [siderolabs/qemu-guest-agent]\n"}
	}), "nodes.worker-2.gpu:", "lacks siderolabs/nonfree-kmod-nvidia-production"},
	{"empty node image", onNode("worker-1", func(n *Node) { n.Image = &NodeImage{} }), "nodes.worker-1.image:", "is empty"},
	{"bad node image extension", onNode("worker-1", func(n *Node) { n.Image = &NodeImage{Extensions: []string{"nvidia"}} }),
		"nodes.worker-1.image.extensions[0]:", "official extension name"},
	{"bad node image schematic", onNode("worker-1", func(n *Node) { n.Image = &NodeImage{Schematic: "customization: ["} }),
		"nodes.worker-1.image.schematic:", "schematic"},
	{"secure boot before v1.14", withImage(Image{SecureBoot: new(true)}), "image.secureBoot:", "use talosVersion v1.14"},
	{"node secure boot before v1.14", onNode("worker-1", func(n *Node) { n.Image = &NodeImage{SecureBoot: new(true)} }),
		"nodes.worker-1.image.secureBoot:", "use talosVersion v1.14"},
	{"secure boot on seabios", func(a *TalosProxmoxClusterArgs) {
		a.TalosVersion, a.NodeDefaults, a.Image = "v1.14.1", &NodeDefaults{Bios: "seabios"}, &Image{SecureBoot: new(true)}
	}, "nodeDefaults.bios:", "UEFI firmware"},
	{"secure boot on a pc machine", func(a *TalosProxmoxClusterArgs) {
		a.TalosVersion, a.NodeDefaults, a.Image = "v1.14.1", &NodeDefaults{VmMachine: "pc"}, &Image{SecureBoot: new(true)}
	}, "nodeDefaults.vmMachine:", "q35"},
	{"secure boot on arm64", func(a *TalosProxmoxClusterArgs) {
		a.TalosVersion, a.Image = "v1.14.1", &Image{SecureBoot: new(true), Arch: "arm64"}
	},
		"image.arch:", "no Secure Boot firmware for arm64"},
	{"unknown ephemeral key", onNode("worker-1", func(n *Node) { n.DiskEncryption = &DiskEncryption{State: "tpm2", Ephemeral: "Tpm"} }),
		"nodes.worker-1.diskEncryption.ephemeral:", "case-sensitive"},
	{"extension the Talos version lacks", withImage(Image{Extensions: []string{"siderolabs/qemu-guest-agent", "siderolabs/retired-driver"}}),
		"image.extensions[1]:", "is not an official extension of Talos v1.11.5"},
	{"node extension the Talos version lacks", onNode("worker-1", func(n *Node) { n.Image = &NodeImage{Extensions: []string{"siderolabs/retired-tools"}} }),
		"nodes.worker-1.image.extensions[0]:", "is not an official extension of Talos v1.11.5"},
	{"device plugin without a GPU node", func(a *TalosProxmoxClusterArgs) { a.NvidiaDevicePlugin = &NvidiaDevicePlugin{} },
		"nvidiaDevicePlugin:", "no node has the NVIDIA GPU preset"},
	{"device plugin version range", func(a *TalosProxmoxClusterArgs) {
		a.NvidiaDevicePlugin = &NvidiaDevicePlugin{Version: "0.18.x"}
		node(a, "worker-2", func(n *Node) { n.Gpu = "nvidia" })
	}, "nvidiaDevicePlugin.version:", "exact chart version"},
	{"csi without storage classes", func(a *TalosProxmoxClusterArgs) { a.ProxmoxCsi = &ProxmoxCsi{} },
		"proxmoxCsi.storageClasses:", "at least one entry"},
	{"csi class without storage", func(a *TalosProxmoxClusterArgs) {
		a.ProxmoxCsi = &ProxmoxCsi{StorageClasses: []ProxmoxStorageClass{{Name: "proxmox-data"}}}
	}, "proxmoxCsi.storageClasses[0].storage:", "is required"},
	{"csi class name", func(a *TalosProxmoxClusterArgs) {
		a.ProxmoxCsi = &ProxmoxCsi{StorageClasses: []ProxmoxStorageClass{{Name: "Proxmox_Data", Storage: "local-lvm"}}}
	}, "proxmoxCsi.storageClasses[0].name:", "is not a StorageClass name"},
	{"csi class twice", func(a *TalosProxmoxClusterArgs) {
		a.ProxmoxCsi = &ProxmoxCsi{StorageClasses: []ProxmoxStorageClass{{Name: "data", Storage: "local-lvm"}, {Name: "data", Storage: "nfs"}}}
	}, "proxmoxCsi.storageClasses[1].name:", "names must be unique"},
	{"csi reclaim policy", func(a *TalosProxmoxClusterArgs) {
		a.ProxmoxCsi = &ProxmoxCsi{StorageClasses: []ProxmoxStorageClass{{Name: "data", Storage: "local-lvm", ReclaimPolicy: "Recycle"}}}
	}, "proxmoxCsi.storageClasses[0].reclaimPolicy:", "Delete (the default) or Retain"},
	{"csi file system", func(a *TalosProxmoxClusterArgs) {
		a.ProxmoxCsi = &ProxmoxCsi{StorageClasses: []ProxmoxStorageClass{{Name: "data", Storage: "local-lvm", FsType: "btrfs"}}}
	}, "proxmoxCsi.storageClasses[0].fsType:", "ext4 (the default) or xfs"},
	{"csi two default classes", func(a *TalosProxmoxClusterArgs) {
		a.ProxmoxCsi = &ProxmoxCsi{StorageClasses: []ProxmoxStorageClass{
			{Name: "data", Storage: "local-lvm", Default: new(true)}, {Name: "nfs", Storage: "nfs", Default: new(true)},
		}}
	}, "proxmoxCsi.storageClasses[1].default:", "only one storage class"},
	{"csi token rotation", func(a *TalosProxmoxClusterArgs) {
		a.ProxmoxCsi = &ProxmoxCsi{TokenRotation: "nov\n", StorageClasses: []ProxmoxStorageClass{{Name: "data", Storage: "local-lvm"}}}
	}, "proxmoxCsi.tokenRotation:", "printable ASCII"},
	{"ccm user too long", func(a *TalosProxmoxClusterArgs) {
		a.ClusterName, a.ProxmoxCcm = "homelab-with-a-very-long-name-that-goes-on-and-on-x", &ProxmoxCcm{}
	}, "proxmoxCcm:", "longer than the 64 characters"},
	{"ccm chart version", func(a *TalosProxmoxClusterArgs) { a.ProxmoxCcm = &ProxmoxCcm{Version: "0.2"} },
		"proxmoxCcm.version:", "exact chart version"},
	{"flux scp-like url", withFlux(func(f *Flux) { f.GitRepository.Url = "git@github.com:me/fleet" }),
		"flux.gitRepository.url:", "ssh://git@github.com/me/fleet"},
	{"flux without known hosts", withFlux(func(f *Flux) { f.KnownHosts = "" }), "flux.knownHosts:", "ssh-keyscan"},
	{"flux bad known hosts", withFlux(func(f *Flux) { f.KnownHosts = "github.com ssh-ed25519 notbase64" }),
		"flux.knownHosts:", "known_hosts format"},
	{"flux key and secret", withFlux(func(f *Flux) { f.SshKey, f.SecretRef, f.KnownHosts = pulumi.String("k"), "mine", "" }),
		"flux.secretRef:", "give one"},
	{"flux version", withFlux(func(f *Flux) { f.Version = "v2.3.0" }), "flux.version:", "v2.9.5"},
	{"flux path outside", withFlux(func(f *Flux) { f.GitRepository.Path = "../elsewhere" }), "flux.gitRepository.path:", "inside the repository"},
	{"flux ssh key on https", withFlux(func(f *Flux) { f.GitRepository.Url, f.SshKey = "https://github.com/me/fleet", pulumi.String("k") }),
		"flux.sshKey:", "not an ssh:// URL"},
	{"csi without manifest sync", func(a *TalosProxmoxClusterArgs) {
		a.ProxmoxCsi = &ProxmoxCsi{StorageClasses: []ProxmoxStorageClass{{Name: "data", Storage: "local-lvm"}}}
		a.ManifestSync = &ManifestSync{Enabled: new(false)}
	}, "proxmoxCsi:", "manifestSync.enabled: false"},
	{"flux branch", withFlux(func(f *Flux) { f.GitRepository.Branch = "main..x" }), "flux.gitRepository.branch:", "not a valid git branch"},
	{"flux without manifest sync", func(a *TalosProxmoxClusterArgs) {
		withFlux(func(*Flux) {})(a)
		a.ManifestSync = &ManifestSync{Enabled: new(false)}
	}, "flux:", "manifestSync.enabled: false"},
	{"empty disk encryption", func(a *TalosProxmoxClusterArgs) { a.DiskEncryption = &DiskEncryption{} }, "diskEncryption:", "is empty"},
	{"unknown disk encryption key", func(a *TalosProxmoxClusterArgs) { a.DiskEncryption = &DiskEncryption{State: "static"} },
		"diskEncryption.state:", "is not a disk encryption key"},
	{"tpm encryption without secure boot", func(a *TalosProxmoxClusterArgs) { a.DiskEncryption = &DiskEncryption{Ephemeral: "tpm"} },
		"diskEncryption.ephemeral:", "do not boot with Secure Boot"},
	{"node tpm encryption without secure boot", onNode("worker-2", func(n *Node) { n.DiskEncryption = &DiskEncryption{State: "tpm"} }),
		"nodes.worker-2.diskEncryption:", "does not boot with Secure Boot"},
	{"security tag", onNode("cp-1", func(n *Node) { n.Tags = []string{"talos-luks-state-tpm"} }), "nodes.cp-1.tags[0]:", "disk encryption"},
	{"bad default taint", func(a *TalosProxmoxClusterArgs) { a.NodeDefaults = &NodeDefaults{Taints: []string{"gpu"}} }, "nodeDefaults.taints[0]:", "has no effect"},
	{"upper-case tag", onNode("cp-1", func(n *Node) { n.Tags = []string{"Prod"} }), "nodes.cp-1.tags[0]:", "\"prod\""},
	{"bad default tag", func(a *TalosProxmoxClusterArgs) { a.NodeDefaults = &NodeDefaults{Tags: []string{"a b"}} }, "nodeDefaults.tags[0]:", "tag"},
	{"instance tag", onNode("cp-1", func(n *Node) { n.Tags = []string{"talos-i-1234abcd"} }), "nodes.cp-1.tags[0]:", "instance"},
	{"bad nameserver", func(a *TalosProxmoxClusterArgs) { a.Network.Nameservers = []string{"dns.google"} }, "network.nameservers[0]:", "IP address"},
	{"bad ntp server", func(a *TalosProxmoxClusterArgs) { a.Network.NtpServers = []string{"time server"} }, "network.ntpServers[0]:", "host name"},
	{"bad pod subnet", func(a *TalosProxmoxClusterArgs) { a.Network.PodSubnets = []string{"10.244.0.0"} }, "network.podSubnets[0]:", "CIDR"},
	{"bad service subnet", func(a *TalosProxmoxClusterArgs) { a.Network.ServiceSubnets = []string{"x"} }, "network.serviceSubnets[0]:", "CIDR"},
	{"bad dns domain", func(a *TalosProxmoxClusterArgs) { a.Network.DnsDomain = "Cluster..local" }, "network.dnsDomain:", "cluster.local"},
	{"bad vlan", func(a *TalosProxmoxClusterArgs) { a.Network.VlanId = new(5000) }, "network.vlanId:", "4094"},
	{"ip6 not IPv6", dualStack(onNode("cp-1", func(n *Node) { n.Ip6 = "10.0.0.99" })), "nodes.cp-1.ip6:", "IPv6"},
	{"ip6 outside subnet", dualStack(onNode("cp-1", func(n *Node) { n.Ip6 = "fd00:2::11" })), "nodes.cp-1.ip6:", "fd00:1::/64"},
	{"ip6 on some nodes only", dualStack(onNode("worker-2", func(n *Node) { n.Ip6 = "" })), "nodes.worker-2.ip6:", "every node"},
	{"duplicate ip6", dualStack(onNode("cp-2", func(n *Node) { n.Ip6 = "fd00:1::11" })), "nodes.cp-2.ip6:", "nodes.cp-1"},
	{"ip6 is the gateway", dualStack(onNode("cp-2", func(n *Node) { n.Ip6 = "fd00:1::1" })), "nodes.cp-2.ip6:", "gateway"},
	{"bad gateway6", dualStack(func(a *TalosProxmoxClusterArgs) { a.Network.Gateway6 = "10.0.0.1" }), "network.gateway6:", "IPv6"},
	{"gateway6 without ip6", func(a *TalosProxmoxClusterArgs) { a.Network.Gateway6 = "fd00:1::1" }, "network.gateway6:", "ip6"},
	{"bad prefixLength6", dualStack(func(a *TalosProxmoxClusterArgs) { a.Network.PrefixLength6 = new(129) }), "network.prefixLength6:", "1 to 128"},
	{"dual-stack without an IPv6 pod subnet", dualStack(func(a *TalosProxmoxClusterArgs) { a.Network.PodSubnets = []string{"10.244.0.0/16"} }),
		"network.podSubnets:", "dual-stack"},
	{"IPv6 service subnet too large", dualStack(func(a *TalosProxmoxClusterArgs) {
		a.Network.ServiceSubnets = []string{"10.96.0.0/12", "fd00:10:96::/64"}
	}), "network.serviceSubnets[1]:", "/108"},
	{"IPv6 pod subnet a node cannot share", dualStack(func(a *TalosProxmoxClusterArgs) {
		a.Network.PodSubnets = []string{"10.244.0.0/16", "fd00:10:244::/64"}
	}), "network.podSubnets[1]:", "/64 per node"},
	{"IPv6 VIP is the gateway", dualStack(func(a *TalosProxmoxClusterArgs) { a.Vip = "fd00:1::1" }), "vip:", "gateway"},
	{"nodeDefaults mtu out of range", func(a *TalosProxmoxClusterArgs) { a.NodeDefaults = &NodeDefaults{Mtu: new(10)} }, "nodeDefaults.mtu:", "576"},
	{"two IPv4 pod subnets", dualStack(func(a *TalosProxmoxClusterArgs) {
		a.Network.PodSubnets = []string{"10.244.0.0/16", "10.245.0.0/16", "fd00:10:244::/56"}
	}), "network.podSubnets[1]:", "one range per family"},
	{"IPv6 pod subnet without ip6", func(a *TalosProxmoxClusterArgs) { a.Network.PodSubnets = []string{"10.244.0.0/16", "fd00:10:244::/56"} },
		"network.podSubnets[1]:", "no IPv6"},
	{"IPv6-only without gateway6", ipv6Only(func(a *TalosProxmoxClusterArgs) { a.Network.Gateway6 = "" }), "network.gateway6:", "IPv6-only"},
	{"IPv4 pod subnet in an IPv6-only cluster", ipv6Only(func(a *TalosProxmoxClusterArgs) { a.Network.PodSubnets = []string{"10.244.0.0/16"} }),
		"network.podSubnets[0]:", "IPv6-only"},
	{"IPv6 VIP without ip6", func(a *TalosProxmoxClusterArgs) { a.Vip = "fd00:1::10" }, "vip:", "ip6"},
	{"IPv4 VIP in an IPv6-only cluster", ipv6Only(func(a *TalosProxmoxClusterArgs) { a.Vip = "10.0.0.10" }), "vip:", "IPv6-only"},
	{"IPv6 VIP outside the subnet", dualStack(func(a *TalosProxmoxClusterArgs) { a.Vip = "fd00:9::10" }), "vip:", "fd00:1::/64"},
	{"bond over one interface", storage(func(n *NodeNetwork) { n.Bond = &NodeBond{Interfaces: new(1)} }),
		"nodes.worker-1.networks[1].bond.interfaces:", "2 to 8"},
	{"bad bond mode", storage(func(n *NodeNetwork) { n.Bond = &NodeBond{Mode: "lacp"} }), "nodes.worker-1.networks[1].bond.mode:", "802.3ad"},
	{"mtu on a bond", storage(func(n *NodeNetwork) { n.Mtu, n.Bond = new(9000), &NodeBond{} }), "nodes.worker-1.networks[1].mtu:", "bond.mtu"},
	{"network mtu out of range", storage(func(n *NodeNetwork) { n.Mtu = new(70000) }), "nodes.worker-1.networks[1].mtu:", "65520"},
	{"mtu below the IPv6 minimum", dualStack(onNode("cp-1", func(n *Node) { n.Mtu = new(1000) })), "nodes.cp-1.mtu:", "1280"},
	{"two NICs on one segment", storage(func(n *NodeNetwork) { n.Bridge = "" }), "nodes.worker-1.networks[1]:", "bond them"},
	{"gateway outside its network", storage(func(n *NodeNetwork) { n.Gateway, n.Routes = "10.60.0.1", []string{"10.80.0.0/16"} }),
		"nodes.worker-1.networks[1].gateway:", "outside every subnet"},
	{"route of another family than its gateway", storage(func(n *NodeNetwork) { n.Gateway, n.Routes = "10.50.0.1", []string{"fd00:60::/48"} }),
		"nodes.worker-1.networks[1].routes[0]:", "another family"},
	{"default route on another network", storage(func(n *NodeNetwork) { n.Gateway, n.Routes = "10.50.0.1", []string{"0.0.0.0/0"} }),
		"nodes.worker-1.networks[1].routes[0]:", "default route"},
	{"gateway without routes", storage(func(n *NodeNetwork) { n.Gateway = "10.50.0.1" }), "nodes.worker-1.networks[1].gateway:", "routes"},
	{"network address not a CIDR", storage(func(n *NodeNetwork) { n.Addresses = []string{"10.50.0.21"} }),
		"nodes.worker-1.networks[1].addresses[0]:", "CIDR"},
	{"network address of another node", storage(func(n *NodeNetwork) { n.Addresses = []string{"10.0.0.22/24"} }),
		"nodes.worker-1.networks[1].addresses[0]:", "nodes.worker-2"},
	{"addresses on the cluster network", onNode("worker-1", func(n *Node) { n.Networks = []NodeNetwork{{Addresses: []string{"10.0.0.99/24"}}} }),
		"nodes.worker-1.networks[0].addresses:", "ip and ip6"},
	{"two cluster networks", onNode("worker-1", func(n *Node) {
		n.Networks = []NodeNetwork{{ClusterNetwork: new(true)}, {Bridge: "vmbr1", ClusterNetwork: new(true)}}
	}), "nodes.worker-1.networks[1].clusterNetwork:", "one network"},
	{"bridge beside networks", func(a *TalosProxmoxClusterArgs) {
		storage(func(*NodeNetwork) {})(a)
		node(a, "worker-1", func(n *Node) { n.Bridge = "vmbr2" })
	}, "nodes.worker-1.bridge:", "networks"},
	{"addresses in nodeDefaults.networks", func(a *TalosProxmoxClusterArgs) {
		a.NodeDefaults = &NodeDefaults{Networks: []NodeNetwork{{}, {Bridge: "vmbr1", Addresses: []string{"10.50.0.9/24"}}}}
	}, "nodeDefaults.networks[1]:", "each node's"},
	{"bad node vlan", onNode("cp-1", func(n *Node) { n.VlanId = new(0) }), "nodes.cp-1.vlanId:", "4094"},
	{"bad bridge", func(a *TalosProxmoxClusterArgs) { a.Network.Bridge = "vmbr 0" }, "network.bridge:", "vmbr0"},
	{"bad datastore", onNode("cp-1", func(n *Node) { n.DatastoreId = "local lvm" }), "nodes.cp-1.datastoreId:", "local-lvm"},
	{"unknown platform", withImage(Image{Platform: "aws"}), "image.platform:", "nocloud"},
	{"metal with static addresses", withImage(Image{Platform: "metal"}), "image.platform:", "dhcp"},
	{"unknown arch", withImage(Image{Arch: "x86_64"}), "image.arch:", "amd64"},
	{"unknown content type", withImage(Image{ContentType: "images"}), "image.contentType:", "import"},
	{"bad factory url", withImage(Image{FactoryUrl: "factory.talos.dev"}), "image.factoryUrl:", "https://factory.talos.dev"},
	{"bad schematic", withImage(Image{Schematic: "customization:\n  systemExtension: {}\n"}), "image.schematic:", "officialExtensions"},
	{"bad extension name", withImage(Image{Extensions: []string{"qemu-guest-agent"}}), "image.extensions[0]:", "siderolabs/"},
	{"duplicate extension", withImage(Image{Extensions: []string{"siderolabs/iscsi-tools", "siderolabs/iscsi-tools"}}), "image.extensions[1]:", "twice"},
	{"bad bios", func(a *TalosProxmoxClusterArgs) { a.NodeDefaults = &NodeDefaults{Bios: "uefi"} }, "nodeDefaults.bios:", "ovmf"},
	{"bad machine type", func(a *TalosProxmoxClusterArgs) { a.NodeDefaults = &NodeDefaults{VmMachine: "i440"} }, "nodeDefaults.vmMachine:", "q35"},
	{"bad scsi controller", func(a *TalosProxmoxClusterArgs) { a.NodeDefaults = &NodeDefaults{ScsiHardware: "virtio"} }, "nodeDefaults.scsiHardware:", "virtio-scsi-pci"},
	{"bad cpu type", func(a *TalosProxmoxClusterArgs) { a.NodeDefaults = &NodeDefaults{CpuType: "host; rm"} }, "nodeDefaults.cpuType:", "host"},
	{"bad install disk", onNode("cp-1", func(n *Node) { n.InstallDisk = "sda" }), "nodes.cp-1.installDisk:", "/dev/sda"},
	{"manifest without name", func(a *TalosProxmoxClusterArgs) {
		a.InlineManifests = []InlineManifest{{Contents: pulumi.String("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")}}
	}, "inlineManifests[0].name:", "required"},
	{"manifest name reserved for helm", func(a *TalosProxmoxClusterArgs) {
		a.InlineManifests = []InlineManifest{{Name: "helm-cilium", Contents: pulumi.String("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")}}
	}, "inlineManifests[0].name:", "reserved"},
	{"duplicate manifest name", func(a *TalosProxmoxClusterArgs) {
		m := InlineManifest{Name: "ns", Contents: pulumi.String("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")}
		a.InlineManifests = []InlineManifest{m, m}
	}, "inlineManifests[1].name:", "twice"},
	{"manifest that is not YAML", func(a *TalosProxmoxClusterArgs) {
		a.InlineManifests = []InlineManifest{{Name: "x", Contents: pulumi.String("kind: [")}}
	}, "inlineManifests[0].contents:", "YAML"},
	{"manifest without kind", func(a *TalosProxmoxClusterArgs) {
		a.InlineManifests = []InlineManifest{{Name: "x", Contents: pulumi.String("apiVersion: v1\nmetadata: {name: x}\n")}}
	}, "inlineManifests[0].contents:", "kind"},
	{"extra manifest not a url", func(a *TalosProxmoxClusterArgs) { a.ExtraManifests = []string{"crds.yaml"} }, "extraManifests[0]:", "http"},
	{"namespace for a url not listed", func(a *TalosProxmoxClusterArgs) {
		a.ExtraManifestNamespaces = map[string]string{"https://example.com/a.yaml": "argocd"}
	}, `extraManifestNamespaces["https://example.com/a.yaml"]:`, "not one of extraManifests"},
	{"extra manifest namespace not a name", func(a *TalosProxmoxClusterArgs) {
		a.ExtraManifests = []string{"https://example.com/a.yaml"}
		a.ExtraManifestNamespaces = map[string]string{"https://example.com/a.yaml": "Argo_CD"}
	}, `extraManifestNamespaces["https://example.com/a.yaml"]:`, "not a namespace name"},
	{"extra manifest namespace without the sync", func(a *TalosProxmoxClusterArgs) {
		a.ExtraManifests = []string{"https://example.com/a.yaml"}
		a.ExtraManifestNamespaces = map[string]string{"https://example.com/a.yaml": "argocd"}
		a.ManifestSync = &ManifestSync{Enabled: new(false)}
	}, `extraManifestNamespaces["https://example.com/a.yaml"]:`, "manifestSync.enabled"},
	{"bad endpoint", func(a *TalosProxmoxClusterArgs) { a.Endpoint = "https://10.0.0.10:6443" }, "endpoint:", "host only"},
	{"bad proxmox cluster name", func(a *TalosProxmoxClusterArgs) { a.ProxmoxClusterName = "my cluster" }, "proxmoxClusterName:", "label value"},
	{"health timeout not a duration", func(a *TalosProxmoxClusterArgs) { a.Health = &Health{Timeout: "10 minutes"} }, "health.timeout:", "duration"},
	{"upgrade timeout negative", func(a *TalosProxmoxClusterArgs) { a.Upgrade = &Upgrade{Timeout: "-5m"} }, "upgrade.timeout:", "positive duration"},
	{"upgrade drain timeout not a duration", func(a *TalosProxmoxClusterArgs) { a.Upgrade = &Upgrade{DrainTimeout: "5"} }, "upgrade.drainTimeout:", "duration"},
	{"upgrade max parallel zero", func(a *TalosProxmoxClusterArgs) { a.Upgrade = &Upgrade{MaxParallel: new(0)} }, "upgrade.maxParallel:", "at least 1"},
	{"cilium repository not a url", withCilium(Cilium{Repository: "helm.cilium.io"}), "cilium.repository:", "https://"},
	{"cilium version range", withCilium(Cilium{Version: "~1.18"}), "cilium.version:", "exact"},
	{"cilium digest not sha256", withCilium(Cilium{Digest: "md5:abc"}), "cilium.digest:", "sha256:<64 hex digits>"},
	{"cilium values yaml invalid", withCilium(Cilium{ValuesYaml: "hubble: [enabled"}), "cilium.valuesYaml:", "not valid YAML"},
	{"cilium values yaml a list", withCilium(Cilium{ValuesYaml: "- a\n- b\n"}), "cilium.valuesYaml:", "mapping"},
	{"cilium without kube-proxy replacement", withCilium(Cilium{ValuesYaml: "kubeProxyReplacement: false\n"}), "cilium.values.kubeProxyReplacement:", "no service proxy"},
	{"helm chart without name", withHelmChart(HelmChart{Chart: "metrics-server", Repository: "https://kubernetes-sigs.github.io/metrics-server", Version: "3.13.0"}),
		"helmCharts[0].name:", "required"},
	{"helm release name too long", withHelmChart(HelmChart{Name: strings.Repeat("a", 54), Chart: "x", Repository: "https://charts.example.com", Version: "1.0.0"}),
		"helmCharts[0].name:", "at most 53"},
	{"helm release named like cilium", func(a *TalosProxmoxClusterArgs) {
		// A repository on loopback that refuses connections: the valid Cilium release is fetched
		// beside the other problems, and a unit test must not reach the internet.
		a.Cilium = &Cilium{Repository: "http://127.0.0.1:9"}
		a.HelmCharts = []HelmChart{{Name: "cilium", Chart: "cilium", Repository: "https://helm.cilium.io", Version: "1.18.0"}}
	}, "helmCharts[0].name:", "already used by cilium"},
	{"helm chart without chart", withHelmChart(HelmChart{Name: "x", Repository: "https://charts.example.com", Version: "1.0.0"}), "helmCharts[0].chart:", "required"},
	{"helm chart without version", withHelmChart(HelmChart{Name: "x", Chart: "x", Repository: "oci://ghcr.io/org/charts"}), "helmCharts[0].version:", "pin an exact version"},
	{"helm chart from a git url", withHelmChart(HelmChart{Name: "x", Chart: "x", Repository: "git://example.com/charts", Version: "1.0.0"}),
		"helmCharts[0].repository:", "oci://"},
	{"helm chart bad namespace", withHelmChart(HelmChart{Name: "x", Chart: "./x", Namespace: "My_NS"}), "helmCharts[0].namespace:", "DNS label"},
	{"helm chart values yaml invalid", withHelmChart(HelmChart{Name: "x", Chart: "./x", ValuesYaml: "a: b: c"}), "helmCharts[0].valuesYaml:", "not valid YAML"},
	{"helm local chart missing", withHelmChart(HelmChart{Name: "x", Chart: "./no-such-chart"}), "helmCharts[0]:", "local chart"},
}

func TestBadInputs(t *testing.T) {
	t.Parallel()

	if len(badInputs) < 40 {
		t.Fatalf("only %d bad inputs", len(badInputs))
	}

	if names, err := runArgs(homelabArgs()); err != nil || len(names) == 0 {
		t.Fatalf("the base case must be valid: %v", err)
	}

	for _, tc := range badInputs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			args := homelabArgs()
			tc.mutate(&args)

			names, err := runArgs(args)
			if err == nil {
				t.Fatalf("no error; want one naming %s", tc.path)
			}

			msg := err.Error()
			if !strings.Contains(msg, tc.path) {
				t.Errorf("error does not name %q:\n%s", tc.path, msg)
			}

			if !strings.Contains(msg, tc.hint) {
				t.Errorf("error does not say %q:\n%s", tc.hint, msg)
			}

			if len(names) != 0 {
				t.Errorf("resources were registered before validation failed: %v", names)
			}
		})
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	t.Parallel()

	args := homelabArgs()
	args.ClusterName = "Bad Name"
	node(&args, "cp-1", func(n *Node) { n.MemoryMib = new(100) })
	node(&args, "worker-1", func(n *Node) { n.DataDisks[0].MountPath = "relative" })

	_, err := runArgs(args)
	if err == nil {
		t.Fatal("no error")
	}

	for _, path := range []string{"clusterName:", "nodes.cp-1.memoryMib:", "nodes.worker-1.dataDisks[0].mountPath:", "(3 problems)"} {
		if !strings.Contains(err.Error(), path) {
			t.Errorf("missing %q in:\n%s", path, err)
		}
	}
}
