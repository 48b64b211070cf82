// Package spec turns the component's raw inputs into a validated, defaulted, plain description
// of a cluster. It reports every problem at once, each prefixed with its property path and
// followed by what to do, before any resource is registered. It imports no Pulumi package.
package spec

// Input is the component's input as plain Go values. Pointers mark values the user may leave
// unset; nil slices mean "use the default".
type Input struct {
	ClusterName                    string
	TalosVersion                   string
	KubernetesVersion              string
	Endpoint                       string
	VIP                            string
	Nodes                          map[string]NodeInput
	NodeDefaults                   NodeDefaultsInput
	Network                        NetworkInput
	Image                          ImageInput
	AllowSchedulingOnControlPlanes *bool
	ProxmoxClusterName             string
	// VMIDStart and VMIDEnd bound the default VM ids; nil for the defaults.
	VMIDStart, VMIDEnd *int
	// ConfigContract is the configuration contract asked for ("v1.13"); "" for the default.
	ConfigContract            string
	ConfigPatches             []Patch
	ControlPlaneConfigPatches []Patch
	WorkerConfigPatches       []Patch
	InlineManifests           []InlineManifestInput
	ExtraManifests            []string
	ExtraManifestNamespaces   map[string]string
	Cilium                    *ChartPresetInput
	// NvidiaDevicePlugin installs NVIDIA's device plugin chart (nil: not installed).
	NvidiaDevicePlugin *ChartPresetInput
	// ProxmoxCSI and ProxmoxCCM install the Proxmox CSI plugin and cloud controller manager.
	ProxmoxCSI *ProxmoxCSIInput
	ProxmoxCCM *ProxmoxCCMInput
	// Flux bootstraps Flux (nil: not installed).
	Flux          *FluxInput
	HelmCharts    []HelmChartInput
	Health        HealthInput
	Credentials   CredentialsInput
	Upgrade       UpgradeInput
	ManifestSync  ManifestSyncInput
	EtcdBackup    *EtcdBackupInput
	Recovery      *RecoveryInput
	Secrets       *SecretsInput
	AllowDataLoss bool
	// DiskEncryption is every node's system volume encryption (nil: none).
	DiskEncryption *DiskEncryptionInput
}

// DiskEncryptionInput names the key that protects each Talos system volume: "tpm", "nodeID", or
// "" for no encryption.
type DiskEncryptionInput struct {
	State     string
	Ephemeral string
}

// Patch is a Talos machine configuration patch (YAML or JSON). A patch that is not known yet
// (an unknown output at preview) cannot be checked and is passed through.
type Patch struct {
	Text  string
	Known bool
}

// KnownPatch is a patch whose text is known.
func KnownPatch(text string) Patch { return Patch{Text: text, Known: true} }

// NodeInput is one node of the cluster; its key in Input.Nodes is its hostname.
type NodeInput struct {
	HostNode      string
	Role          string
	IP            string
	MACAddress    string
	VMID          *int
	CPU           *int
	MemoryMiB     *int
	DiskSizeGiB   *int
	DatastoreID   string
	Bridge        string
	VLANID        *int
	Tags          []string
	DataDisks     []DataDiskInput
	PCIDevices    []PCIDeviceInput
	Labels        map[string]string
	Taints        []string
	ConfigPatches []Patch
	InstallDisk   string
	// Image is the node's own image (nil: the cluster's).
	Image *NodeImageInput
	// GPU is a GPU preset ("nvidia"; "" none).
	GPU string
	// DiskEncryption is the node's own (nil: the cluster's).
	DiskEncryption *DiskEncryptionInput
	// IP6 is the node's static IPv6 address ("" none).
	IP6 string
	// MTU is the cluster NIC's MTU (nil: nodeDefaults.mtu, else the bridge's).
	MTU *int
	// Networks are the node's NICs (nil: nodeDefaults.networks, else one NIC).
	Networks []NetworkDeviceInput
}

// NetworkDeviceInput is one network of a node: a Proxmox NIC, or with Bond several bonded ones.
type NetworkDeviceInput struct {
	Bridge         string
	VLANID         *int
	MTU            *int
	MACAddress     string
	Addresses      []string
	DHCP           *bool
	Gateway        string
	Routes         []string
	ClusterNetwork *bool
	Bond           *BondInput
}

// BondInput bonds several Proxmox NICs of one network in Talos.
type BondInput struct {
	Mode       string
	Interfaces *int
	MTU        *int
}

// NodeImageInput is a node's own image: extensions or a schematic, and Secure Boot, over the
// cluster's image.
type NodeImageInput struct {
	Extensions []string
	Schematic  string
	SecureBoot *bool
}

// DataDiskInput is an extra virtual disk of a node.
type DataDiskInput struct {
	SizeGiB     int
	DatastoreID string
	MountPath   string
}

// PCIDeviceInput is a host PCI device passed through to a node, by mapping or by id.
type PCIDeviceInput struct {
	Mapping string
	ID      string
	PCIe    *bool
	ROMBar  *bool
	XVGA    *bool
}

// NodeDefaultsInput holds values that apply to every node that does not set its own.
type NodeDefaultsInput struct {
	CPU          *int
	MemoryMiB    *int
	DiskSizeGiB  *int
	DatastoreID  string
	Bridge       string
	CPUType      string
	VMMachine    string
	BIOS         string
	SCSIHardware string
	Tags         []string
	Taints       []string
	MTU          *int
	Networks     []NetworkDeviceInput
}

// NetworkInput is the cluster network.
type NetworkInput struct {
	Gateway        string
	PrefixLength   *int
	Nameservers    []string
	NTPServers     []string
	Bridge         string
	VLANID         *int
	DHCP           *bool
	PodSubnets     []string
	ServiceSubnets []string
	DNSDomain      string
	Gateway6       string
	PrefixLength6  *int
}

// ImageInput selects the Talos image built by the Image Factory.
type ImageInput struct {
	FactoryURL      string
	Extensions      []string
	Schematic       string
	Platform        string
	Arch            string
	DatastoreID     string
	SharedDatastore *bool
	ContentType     string
	SecureBoot      *bool
}

// InlineManifestInput is a Kubernetes manifest Talos applies at bootstrap.
type InlineManifestInput struct {
	Name     string
	Contents Patch
}
