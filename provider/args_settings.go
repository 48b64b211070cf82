package provider

import "github.com/pulumi/pulumi-go-provider/infer"

// NodeDefaults are values for every node that does not set its own.
type NodeDefaults struct {
	Cpu          *int     `pulumi:"cpu,optional"`
	MemoryMib    *int     `pulumi:"memoryMib,optional"`
	DiskSizeGib  *int     `pulumi:"diskSizeGib,optional"`
	DatastoreId  string   `pulumi:"datastoreId,optional"`
	Bridge       string   `pulumi:"bridge,optional"`
	CpuType      string   `pulumi:"cpuType,optional"`
	VmMachine    string   `pulumi:"vmMachine,optional"`
	Bios         string   `pulumi:"bios,optional"`
	ScsiHardware string   `pulumi:"scsiHardware,optional"`
	Tags         []string `pulumi:"tags,optional"`
}

// Annotate documents the node defaults.
func (d *NodeDefaults) Annotate(an infer.Annotator) {
	an.Describe(d, "Values applied to every node that does not set its own. Memory ballooning is always off, "+
		"as Talos requires.")
	an.Describe(&d.Cpu, "CPU cores per node. Default: 2.")
	an.Describe(&d.MemoryMib, "Memory per node in MiB. Default: 4096.")
	an.Describe(&d.DiskSizeGib, "OS disk size in GiB. Default: 20.")
	an.Describe(&d.DatastoreId, "Proxmox storage for OS disks, data disks and cloud-init drives. Default: `local-lvm`.")
	an.Describe(&d.Bridge, "Proxmox bridge for the NICs. Default: `network.bridge` (`vmbr0`).")
	an.Describe(&d.CpuType, "Proxmox CPU type. Default: `host` (Talos needs x86-64-v2 features).")
	an.Describe(&d.VmMachine, "Proxmox machine type. Default: `q35`.")
	an.Describe(&d.Bios, "`seabios` (default) or `ovmf` (UEFI; the component adds the EFI disk it needs).")
	an.Describe(&d.ScsiHardware, "SCSI controller. Default: `virtio-scsi-pci`. Do not use `virtio-scsi-single`: "+
		"Talos installs hang on it (siderolabs/talos#11173).")
	an.Describe(&d.Tags, "Extra Proxmox tags on every VM.")
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
}

// Annotate documents the network.
func (n *Network) Annotate(an infer.Annotator) {
	an.Describe(n, "How nodes are addressed and which networks Kubernetes uses.")
	an.Describe(&n.Gateway, "Default gateway of the node subnet, e.g. `192.168.1.1`. Required; with DHCP it names the "+
		"subnet (with `prefixLength`, /20 or longer) where new nodes are looked for.")
	an.Describe(&n.PrefixLength, "Length of the node subnet's prefix (24 for a /24). Default: 24.")
	an.Describe(&n.Nameservers, "DNS resolvers for the nodes. Default: Talos' defaults (1.1.1.1, 8.8.8.8).")
	an.Describe(&n.NtpServers, "Time servers for the nodes. Default: Talos' default (time.cloudflare.com).")
	an.Describe(&n.Bridge, "Proxmox bridge for the NICs. Default: `vmbr0`.")
	an.Describe(&n.VlanId, "VLAN tag for every NIC (1 to 4094). Default: untagged.")
	an.Describe(&n.Dhcp, "Take addresses from DHCP instead of static `ip`s. A new node is found by its VM's MAC address: "+
		"the component scans the subnet of `gateway` for the Talos API (port 50000, reachable from where Pulumi runs) and "+
		"reads each node's links through the maintenance API, because a node in maintenance mode runs no QEMU guest agent "+
		"(siderolabs/talos#11651); when the agent already reports an address, that is used. Give the VMs DHCP "+
		"reservations (with `macAddress`) so the addresses survive reboots. Default: false.")
	an.Describe(&n.PodSubnets, "CIDRs pods get addresses from. Default: `10.244.0.0/16`.")
	an.Describe(&n.ServiceSubnets, "CIDRs Kubernetes services get addresses from. Default: `10.96.0.0/12`.")
	an.Describe(&n.DnsDomain, "Cluster DNS domain. Default: `cluster.local`.")
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
}

// Annotate documents the image.
func (i *Image) Annotate(an infer.Annotator) {
	an.Describe(i, "The Talos image: the Image Factory builds it from a schematic (the list of system "+
		"extensions and customisations) and Proxmox downloads it once per host.")
	an.Describe(&i.FactoryUrl, "Image Factory URL. Default: `https://factory.talos.dev`.")
	an.Describe(&i.Extensions, "Official system extensions baked into the image, e.g. "+
		"`siderolabs/iscsi-tools` for Longhorn. Default: `[\"siderolabs/qemu-guest-agent\"]`. "+
		"The Proxmox guest agent is enabled only when `siderolabs/qemu-guest-agent` is present.")
	an.Describe(&i.Schematic, "A complete Image Factory schematic as YAML (extensions, kernel arguments, …). "+
		"Overrides `extensions`.")
	an.Describe(&i.Platform, "Talos platform image: `nocloud` (default; reads the static address from the "+
		"Proxmox cloud-init drive) or `metal` (DHCP only).")
	an.Describe(&i.Arch, "CPU architecture: `amd64` (default) or `arm64`.")
	an.Describe(&i.DatastoreId, "Proxmox storage the image is downloaded to. It must allow the content type "+
		"(`import` or `iso`). Default: `local`.")
	an.Describe(&i.SharedDatastore, "The image datastore is shared by every Proxmox host (NFS, Ceph, …): "+
		"download the image once instead of once per host. Default: false.")
	an.Describe(&i.ContentType, "`import` (default): the qcow2 image is imported into each VM through the "+
		"Proxmox API; needs PVE 8.4 or later and no SSH. `iso`: the raw image is decompressed into an iso "+
		"datastore and imported over SSH (configure the proxmoxve provider's ssh settings).")
}

// Health configures the health gate that runs after bootstrap and after every change.
type Health struct {
	Timeout           string `pulumi:"timeout,optional"`
	RequireNodesReady *bool  `pulumi:"requireNodesReady,optional"`
}

// Annotate documents the health gate.
func (h *Health) Annotate(an infer.Annotator) {
	an.Describe(h, "The health gate: after bootstrap and after every change, the component waits until the cluster "+
		"passes the checks `talosctl health` runs (etcd, apid, kubelet, boot sequence, Kubernetes nodes and control "+
		"plane, kube-proxy, CoreDNS) and every Node is Ready. The outputs depend on it, so programs that use the "+
		"kubeconfig run only against a healthy cluster. Progress shows in Pulumi's log.")
	an.Describe(&h.Timeout, "How long to wait, as a duration such as `10m` or `90s`. On timeout `pulumi up` fails "+
		"naming the failing check and node; nothing is destroyed and the next `up` runs the gate again. Default: `10m`.")
	an.Describe(&h.RequireNodesReady, "Require every Kubernetes Node to be Ready. Default: true, unless a config "+
		"patch sets the CNI to `none` and `cilium` is not set (nodes then stay NotReady until you deploy a CNI).")
}

// Upgrade configures rolling Talos OS upgrades.
type Upgrade struct {
	Drain          *bool  `pulumi:"drain,optional"`
	DrainTimeout   string `pulumi:"drainTimeout,optional"`
	Timeout        string `pulumi:"timeout,optional"`
	MaxParallel    *int   `pulumi:"maxParallel,optional"`
	AllowDowngrade *bool  `pulumi:"allowDowngrade,optional"`
}

// Annotate documents the upgrade policy.
func (u *Upgrade) Annotate(an infer.Annotator) {
	an.Describe(u, "How running nodes are upgraded when `talosVersion` or the image's schematic changes.")
	an.Describe(&u.Drain, "Cordon and drain each node (eviction API, PodDisruptionBudgets respected) before its "+
		"reboot, and uncordon it once healthy. Default: true.")
	an.Describe(&u.DrainTimeout, "How long a drain may take before the upgrade stops with an error naming the pods "+
		"left on the node, as a duration. Default: `5m`.")
	an.Describe(&u.Timeout, "How long each wait of one node's upgrade may take (its gates, the image install, the "+
		"reboot), as a duration. Default: `10m`.")
	an.Describe(&u.MaxParallel, "How many workers reboot at once. Control planes always go one at a time. Default: 1.")
	an.Describe(&u.AllowDowngrade, "Allow `talosVersion` to go back to an older release. Default: false.")
}

// ManifestSync configures the sync of the cluster's manifests after bootstrap.
type ManifestSync struct {
	Enabled                *bool  `pulumi:"enabled,optional"`
	PruneCrdsAndNamespaces *bool  `pulumi:"pruneCrdsAndNamespaces,optional"`
	Force                  *bool  `pulumi:"force,optional"`
	Timeout                string `pulumi:"timeout,optional"`
}

// Annotate documents the manifest sync.
func (m *ManifestSync) Annotate(an infer.Annotator) {
	an.Describe(m, "Manifest sync: after the health gate, every `pulumi up` whose Cilium, Helm charts, inline or "+
		"extra manifests changed applies them to the cluster with server-side apply (field manager `talos` and "+
		"inventory `kube-system/talos-bootstrap-manifests-inventory`, the ones `talosctl upgrade-k8s` uses), after a "+
		"server-side dry run of every object, and deletes the objects it applied before that the configuration no "+
		"longer has. The preview lists the objects added, changed and pruned per manifest.")
	an.Describe(&m.Enabled, "Sync manifests after bootstrap. Default: true. When false, changes only reach the "+
		"control planes' configuration (Talos' own behaviour).")
	an.Describe(&m.PruneCrdsAndNamespaces, "Also delete CustomResourceDefinitions and Namespaces that left the "+
		"configuration (deleting one deletes every object of that type or in it). Default: false: they are left "+
		"in place with a warning and no longer tracked.")
	an.Describe(&m.Force, "Delete and recreate objects whose immutable fields changed (a Service's type, a "+
		"Deployment's selector), as `talosctl upgrade-k8s --manifests-force` does; without it such a change fails "+
		"the sync at its dry run, before anything changed. Jobs are always recreated when their pod template "+
		"changes (charts change it with their values). A recreated object is deleted before its new version is "+
		"created: if the API server refuses the new version (an invalid value answers like an immutable field), the "+
		"object is gone and the sync fails naming it. Default: false.")
	an.Describe(&m.Timeout, "How long the sync may take, including the wait for changed objects to become ready, "+
		"as a duration. Default: `5m`.")
}

// Credentials is the lifetime of the client credentials.
type Credentials struct {
	Validity    string `pulumi:"validity,optional"`
	RenewBefore string `pulumi:"renewBefore,optional"`
}

// Annotate documents the credentials' lifetime.
func (c *Credentials) Annotate(an infer.Annotator) {
	an.Describe(c, "Lifetime of the admin talosconfig's and kubeconfig's client certificates.")
	an.Describe(&c.Validity, "How long a new certificate is valid, as a duration. Default: `8760h` (a year, as Talos "+
		"issues them).")
	an.Describe(&c.RenewBefore, "A `pulumi up` this long or less before expiry renews both. Default: `720h` (30 days). "+
		"Run an up in that window (a scheduled CI job does) and the credentials never expire under you.")
}
