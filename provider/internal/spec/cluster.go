package spec

import (
	"net/netip"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
)

// Role is a node's Talos machine type.
type Role string

// The two Talos machine types.
const (
	RoleControlPlane Role = "controlplane"
	RoleWorker       Role = "worker"
)

// ContentType selects how the image reaches Proxmox and how VMs import it.
type ContentType string

// Image content types.
const (
	// ContentImport downloads the qcow2 image into an `import` datastore; VMs use importFrom.
	// Proxmox API only, no SSH (PVE 8.4 or later).
	ContentImport ContentType = "import"
	// ContentISO downloads the raw image (gz-decompressed) into an `iso` datastore; VMs use
	// fileId, which the proxmoxve provider imports over SSH.
	ContentISO ContentType = "iso"
)

// Cluster is a validated cluster with every default applied.
type Cluster struct {
	Name          string
	TalosVersion  string // e.g. v1.11.5
	TalosContract string // e.g. v1.11
	// ConfigContract is the configuration contract a cluster created now gets (the Talos minor,
	// at most NewestContract). A running cluster keeps the one it was created with.
	ConfigContract string
	// ContractDeclared says configContract is set (an adopted cluster keeps it, not the minor
	// its nodes run).
	ContractDeclared bool
	// KubernetesVersion is the Kubernetes version the cluster runs, e.g. v1.34.1: kubernetesVersion
	// when set; unset, Build puts the default of the Talos minor, which a new cluster records, and
	// a running cluster runs the version it recorded (RunningKubernetes).
	KubernetesVersion string
	// KubernetesDeclared says kubernetesVersion is set: the cluster runs it and records it.
	KubernetesDeclared bool
	// Endpoint is the host of https://<endpoint>:6443. Empty means "the first control plane's
	// address", which in DHCP mode is only known once its VM reports it.
	Endpoint           string
	VIP                string
	ProxmoxClusterName string
	// VMIDs is the range the default VM ids come from (see DefaultVMIDStart).
	VMIDs                          VMIDRange
	AllowSchedulingOnControlPlanes bool
	Network                        Network
	Image                          Image
	// Nodes sorted by name.
	Nodes           []Node
	InlineManifests []InlineManifest
	ExtraManifests  []string
	// ExtraManifestNamespaces are the extra manifests the manifest sync applies, by URL, with the
	// namespace for their namespaced objects; Talos gets only the others (TalosExtraManifests).
	ExtraManifestNamespaces map[string]string
	// Cilium is set when the `cilium` input is: CNI none, kube-proxy off.
	Cilium bool
	// NvidiaDevicePlugin is set when the nvidiaDevicePlugin input is: its chart is a Helm release
	// and the GPU nodes carry the label its DaemonSet selects (NvidiaGPULabel).
	NvidiaDevicePlugin bool
	// ProxmoxTokens are the Proxmox API tokens the component makes for consumers in the cluster
	// (proxmoxCsi, proxmoxCcm), in that order.
	ProxmoxTokens []ProxmoxToken
	// ExternalCloudProvider is set with proxmoxCcm: the kubelets leave the Nodes to the CCM
	// (cloud-provider: external) and name their VMs (provider-id proxmox://<region>/<vmid>).
	ExternalCloudProvider bool
	// Flux is set when the flux input is.
	Flux *Flux
	// AssignedVMIDs are the VM ids the nodes that pin none get (from the Proxmox inventory, at
	// preview); nil when Proxmox was not asked. See VMIDOf.
	AssignedVMIDs map[string]int
	// HelmReleases are the charts rendered into inline manifests, Cilium first.
	HelmReleases []helmrender.Release
	// Health and Upgrade are the day-2 policies.
	Health       Health
	Credentials  Credentials
	Upgrade      Upgrade
	ManifestSync ManifestSync
	// EtcdBackup is nil without etcdBackup, Recovery nil without recovery.
	EtcdBackup *EtcdBackup
	Recovery   *Recovery
	// DiskEncryption is the cluster's diskEncryption, which nodes without their own get.
	DiskEncryption DiskEncryption
	// Secrets is nil without secrets: the cluster gets secrets of its own.
	Secrets *Secrets
	// AllowDataLoss accepts plans that leave the cluster without its etcd data.
	AllowDataLoss bool
	// Warnings are problems that do not stop the deployment.
	Warnings []string
}

// Network is the validated cluster network.
type Network struct {
	Gateway        string
	PrefixLength   int
	Nameservers    []string
	NTPServers     []string
	DHCP           bool
	PodSubnets     []string
	ServiceSubnets []string
	DNSDomain      string
	// Gateway6 is the IPv6 default gateway ("" none); PrefixLength6 the IPv6 node prefix.
	Gateway6      string
	PrefixLength6 int
	// IPv4 and IPv6 are the families nodes are addressed in: IPv4 only, dual-stack (IPv4 first)
	// or IPv6 only.
	IPv4, IPv6 bool
	// Subnet6 is the IPv6 node subnet (from gateway6, else the nodes' ip6); invalid without IPv6.
	Subnet6 netip.Prefix
}

// Image is the validated image selection, with the schematic resolved.
type Image struct {
	FactoryURL      string
	SchematicYAML   string
	SchematicID     string
	Extensions      []string
	Platform        string
	Arch            string
	DatastoreID     string
	SharedDatastore bool
	ContentType     ContentType
	GuestAgent      bool // the qemu-guest-agent extension is in the image
	InstallerImage  string
	// Custom: the schematic is a whole one given (image.schematic), not made of extensions.
	Custom bool
	// ExtensionPaths are the properties each extension comes from ("image.extensions[1]",
	// "nodes.gpu-1.gpu"), for problems the Image Factory finds with them.
	ExtensionPaths map[string]string
	// SecureBoot: the factory's Secure Boot image and installer (signed systemd-boot and UKI); the
	// VM gets UEFI firmware with an EFI disk in setup mode and a TPM 2.0.
	SecureBoot bool
}

// Node is a validated node with defaults applied.
type Node struct {
	Name         string
	HostNode     string
	Role         Role
	IP           string // empty in DHCP mode
	MACAddress   string // upper case, empty when Proxmox chooses
	VMID         int    // 0 when Proxmox chooses
	CPU          int
	MemoryMiB    int
	DiskSizeGiB  int
	DatastoreID  string
	Bridge       string
	VLANID       int // 0 = untagged
	CPUType      string
	VMMachine    string
	BIOS         string
	SCSIHardware string
	Tags         []string // sorted, unique, includes talos, role and cluster name
	DataDisks    []DataDisk
	PCIDevices   []PCIDevice
	Labels       map[string]string // user labels only
	// Taints are the node's taints as Talos' nodeTaints holds them: by key, "value:Effect" or
	// "Effect" (nodeDefaults.taints with the node's own over them); nil when none.
	Taints      map[string]string
	InstallDisk string
	// Image is the image the node runs: the cluster's, or its own schematic (nodes.<n>.image)
	// with the cluster's factory, platform, architecture and datastore.
	Image Image
	// GPU is the node's GPU preset (GPUNvidia) or "".
	GPU string
	// DiskEncryption is how Talos encrypts the node's STATE and EPHEMERAL volumes (nodes.<n> or
	// the cluster's diskEncryption); zero when it does not.
	DiskEncryption DiskEncryption
	// IP6 is the node's IPv6 address ("" without IPv6). In an IPv6-only cluster IP is it too.
	IP6 string
	// NICs are the VM's network devices (net0 is the cluster network's first); Links what Talos
	// makes of them, the cluster network first. Bridge, VLANID and MACAddress are NICs[0]'s.
	NICs  []NIC
	Links []Link
}

// DataDisk is an extra disk; Serial identifies it inside the guest.
type DataDisk struct {
	SizeGiB     int
	DatastoreID string
	MountPath   string // empty: attached, not formatted or mounted
	Serial      string
}

// PCIDevice is a passed-through host PCI device.
type PCIDevice struct {
	Mapping string
	ID      string
	PCIe    bool
	ROMBar  bool
	XVGA    bool
}

// InlineManifest is a manifest Talos applies at bootstrap on control planes.
type InlineManifest struct {
	Name     string
	Contents Patch
}

// ControlPlanes returns the control plane nodes, sorted by name.
func (c *Cluster) ControlPlanes() []Node { return c.byRole(RoleControlPlane) }

// Workers returns the worker nodes, sorted by name.
func (c *Cluster) Workers() []Node { return c.byRole(RoleWorker) }

func (c *Cluster) byRole(r Role) []Node {
	var out []Node

	for _, n := range c.Nodes {
		if n.Role == r {
			out = append(out, n)
		}
	}

	return out
}

// BootstrapNode is the node that bootstraps etcd: the first control plane by name.
func (c *Cluster) BootstrapNode() Node { return c.ControlPlanes()[0] }
