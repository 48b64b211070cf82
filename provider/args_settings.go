package provider

// NodeDefaults are values for every node that does not set its own.
type NodeDefaults struct {
	Cpu          *int          `pulumi:"cpu,optional"`
	MemoryMib    *int          `pulumi:"memoryMib,optional"`
	DiskSizeGib  *int          `pulumi:"diskSizeGib,optional"`
	DatastoreId  string        `pulumi:"datastoreId,optional"`
	Bridge       string        `pulumi:"bridge,optional"`
	CpuType      string        `pulumi:"cpuType,optional"`
	VmMachine    string        `pulumi:"vmMachine,optional"`
	Bios         string        `pulumi:"bios,optional"`
	ScsiHardware string        `pulumi:"scsiHardware,optional"`
	Tags         []string      `pulumi:"tags,optional"`
	Taints       []string      `pulumi:"taints,optional"`
	Mtu          *int          `pulumi:"mtu,optional"`
	Networks     []NodeNetwork `pulumi:"networks,optional"`
}

// Network is how nodes are addressed.
type Network struct {
	Gateway        string   `pulumi:"gateway,optional"`
	PrefixLength   *int     `pulumi:"prefixLength,optional"`
	Nameservers    []string `pulumi:"nameservers,optional"`
	NtpServers     []string `pulumi:"ntpServers,optional"`
	Bridge         string   `pulumi:"bridge,optional"`
	VlanId         *int     `pulumi:"vlanId,optional"`
	Dhcp           *bool    `pulumi:"dhcp,optional"`
	PodSubnets     []string `pulumi:"podSubnets,optional"`
	ServiceSubnets []string `pulumi:"serviceSubnets,optional"`
	DnsDomain      string   `pulumi:"dnsDomain,optional"`
	Gateway6       string   `pulumi:"gateway6,optional"`
	PrefixLength6  *int     `pulumi:"prefixLength6,optional"`
}

// NodeNetwork is one of a node's networks: a Proxmox NIC, or a bond of several.
type NodeNetwork struct {
	Bridge         string    `pulumi:"bridge,optional"`
	VlanId         *int      `pulumi:"vlanId,optional"`
	Mtu            *int      `pulumi:"mtu,optional"`
	MacAddress     string    `pulumi:"macAddress,optional"`
	Addresses      []string  `pulumi:"addresses,optional"`
	Dhcp           *bool     `pulumi:"dhcp,optional"`
	Gateway        string    `pulumi:"gateway,optional"`
	Routes         []string  `pulumi:"routes,optional"`
	ClusterNetwork *bool     `pulumi:"clusterNetwork,optional"`
	Bond           *NodeBond `pulumi:"bond,optional"`
}

// NodeBond bonds several Proxmox NICs into one Talos link.
type NodeBond struct {
	Mode       string `pulumi:"mode,optional"`
	Interfaces *int   `pulumi:"interfaces,optional"`
	Mtu        *int   `pulumi:"mtu,optional"`
}

// Image selects the Talos image built by the Image Factory.
type Image struct {
	FactoryUrl      string   `pulumi:"factoryUrl,optional"`
	Extensions      []string `pulumi:"extensions,optional"`
	Schematic       string   `pulumi:"schematic,optional"`
	Platform        string   `pulumi:"platform,optional"`
	Arch            string   `pulumi:"arch,optional"`
	DatastoreId     string   `pulumi:"datastoreId,optional"`
	SharedDatastore *bool    `pulumi:"sharedDatastore,optional"`
	ContentType     string   `pulumi:"contentType,optional"`
	SecureBoot      *bool    `pulumi:"secureBoot,optional"`
}

// Health configures the health gate that runs after bootstrap and after every change.
type Health struct {
	Timeout           string `pulumi:"timeout,optional"`
	RequireNodesReady *bool  `pulumi:"requireNodesReady,optional"`
}

// Upgrade configures rolling Talos OS upgrades.
type Upgrade struct {
	Drain          *bool  `pulumi:"drain,optional"`
	DrainTimeout   string `pulumi:"drainTimeout,optional"`
	Timeout        string `pulumi:"timeout,optional"`
	MaxParallel    *int   `pulumi:"maxParallel,optional"`
	AllowDowngrade *bool  `pulumi:"allowDowngrade,optional"`
}

// ManifestSync configures the sync of the cluster's manifests after bootstrap.
type ManifestSync struct {
	Enabled                *bool  `pulumi:"enabled,optional"`
	PruneCrdsAndNamespaces *bool  `pulumi:"pruneCrdsAndNamespaces,optional"`
	Force                  *bool  `pulumi:"force,optional"`
	Timeout                string `pulumi:"timeout,optional"`
}

// Credentials is the lifetime of the client credentials.
type Credentials struct {
	Validity    string `pulumi:"validity,optional"`
	RenewBefore string `pulumi:"renewBefore,optional"`
}
