// Package plan turns a validated cluster into the concrete Proxmox objects to create: one image
// download per (Proxmox host, datastore) — or one in total on a shared datastore — and one VM
// layout per node. It imports no Pulumi package.
package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/imagefactory"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// Plan is what the component creates on Proxmox.
type Plan struct {
	// Downloads, sorted by Key.
	Downloads []Download
	// VMs in node-name order.
	VMs []VM
}

// Download is one image download into a Proxmox datastore.
type Download struct {
	// Key names the download resource: `<cluster>-image` when shared, else
	// `<cluster>-image-<host>` or `<cluster>-image-<host>-<datastore>` when one host downloads
	// into several datastores (never happens today: one image datastore per cluster).
	Key           string
	HostNode      string
	DatastoreID   string
	SchematicID   string
	URL           string
	FileName      string
	ContentType   string
	Decompression string
	// Existing is the Talos image already on the host that the VMs are made from instead of a
	// download (an adopted cluster's, left there by the tool that made it); none when VolID is "".
	Existing Existing
}

// Existing is a Talos image file already on a datastore.
type Existing struct {
	// VolID is the file's volume id ("local:iso/talos-….img").
	VolID string
	// ISO tells a raw image in iso content (a disk's fileId) from an image to import (importFrom).
	ISO bool
}

// Reuse makes the downloads of existing (by download key) use the image already there.
func (p *Plan) Reuse(existing map[string]Existing) {
	for i, d := range p.Downloads {
		if e, ok := existing[d.Key]; ok {
			p.Downloads[i].Existing = e
		}
	}
}

// VM is the Proxmox layout of one node.
type VM struct {
	Node     spec.Node
	Download int // index into Plan.Downloads
	Disks    []Disk
	Hostpcis []Hostpci
	// Agent is on only when the image has the qemu-guest-agent extension (Talos documents
	// that enabling it without the extension only produces log spam and slow operations).
	Agent bool
	// EFIDisk is added for OVMF (UEFI) firmware, without Microsoft's and the distribution's keys
	// enrolled (setup mode), so a Secure Boot image enrols Talos' own.
	EFIDisk bool
	// TPM adds a TPM 2.0 state disk, which Secure Boot images measure into and Talos seals disk
	// encryption keys to.
	TPM bool
	// IPv4Address is the cloud-init address ("10.0.0.11/24" or "dhcp"); IPv4Gateway is empty
	// with DHCP.
	IPv4Address string
	IPv4Gateway string
	// IPv6Address is the cloud-init IPv6 address ("fd00:1::21/64"; "" without IPv6); IPv6Gateway
	// is empty without network.gateway6. An IPv6-only node has no IPv4Address.
	IPv6Address string
	IPv6Gateway string
	Description string
}

// Disk is one SCSI disk of a VM.
type Disk struct {
	Interface   string // scsi0, scsi1, ...
	DatastoreID string
	SizeGiB     int
	// FromImage is true for the OS disk, which is imported from the downloaded image.
	FromImage bool
	Serial    string
}

// Hostpci is one PCI passthrough slot.
type Hostpci struct {
	Device  string // hostpci0 ... hostpci15
	Mapping string
	ID      string
	PCIe    bool
	ROMBar  bool
	XVGA    bool
}

// ImageFileName is the name of image img downloaded in the datastore. It carries the cluster,
// the Talos version and the schematic, so clusters, versions and node images never collide.
func ImageFileName(c *spec.Cluster, img spec.Image) string {
	ext := "qcow2"
	if img.ContentType == spec.ContentISO {
		// Proxmox only accepts .iso and .img in an iso datastore; the raw image is
		// decompressed on download.
		ext = "img"
	}

	sb := ""
	if img.SecureBoot {
		sb = "-secureboot"
	}

	return fmt.Sprintf("%s-talos-%s-%s-%s-%s%s.%s", c.Name, c.TalosVersion, img.SchematicID[:16], img.Platform, img.Arch, sb, ext)
}

// ImageURL is the Image Factory URL the download of image img fetches.
func ImageURL(c *spec.Cluster, img spec.Image) string {
	ext := "qcow2"
	if img.ContentType == spec.ContentISO {
		ext = "raw.gz"
	}

	return imagefactory.ImageURL(img.FactoryURL, img.SchematicID, c.TalosVersion, img.Platform, img.Arch, ext, img.SecureBoot)
}

// Build plans the Proxmox side of a cluster: one download per (host, schematic, Secure Boot) its
// nodes need (per schematic and Secure Boot with a shared datastore), and the VMs.
func Build(c *spec.Cluster) *Plan {
	p := &Plan{}

	// The key names the download resource; the cluster image's keys are those of a cluster
	// without node images, so a node image added later changes no existing download. A Secure
	// Boot image's key ends in -secureboot.
	keyOf := func(host string, img spec.Image) string {
		key := "image-" + host
		if c.Image.SharedDatastore {
			key = "image"
		}

		if img.SchematicID != c.Image.SchematicID {
			key += "-" + img.SchematicID[:16]
		}

		// Whatever the cluster's setting: a cluster turning Secure Boot on then replaces no
		// download by another of the same file (a plain image keeps its key and file).
		if img.SecureBoot {
			key += "-secureboot"
		}

		return key
	}

	// Hosts in sorted order, so a shared download lands on the first host by name and the plan
	// does not depend on map order.
	nodes := slices.Clone(c.Nodes)
	slices.SortStableFunc(nodes, func(a, b spec.Node) int { return strings.Compare(a.HostNode, b.HostNode) })

	for _, n := range nodes {
		img := c.ImageOf(n)
		key := keyOf(n.HostNode, img)

		if slices.ContainsFunc(p.Downloads, func(d Download) bool { return d.Key == key }) {
			continue
		}

		d := Download{
			Key:         key,
			HostNode:    n.HostNode,
			DatastoreID: img.DatastoreID,
			SchematicID: img.SchematicID,
			URL:         ImageURL(c, img),
			FileName:    ImageFileName(c, img),
			ContentType: string(img.ContentType),
		}
		if img.ContentType == spec.ContentISO {
			d.Decompression = "gz"
		}

		p.Downloads = append(p.Downloads, d)
	}

	slices.SortFunc(p.Downloads, func(a, b Download) int { return strings.Compare(a.Key, b.Key) })

	for _, n := range c.Nodes {
		key := keyOf(n.HostNode, c.ImageOf(n))
		p.VMs = append(p.VMs, planVM(c, n, slices.IndexFunc(p.Downloads, func(d Download) bool { return d.Key == key })))
	}

	return p
}

func planVM(c *spec.Cluster, n spec.Node, download int) VM {
	vm := VM{
		Node:     n,
		Download: download,
		Agent:    c.ImageOf(n).GuestAgent,
		EFIDisk:  n.BIOS == "ovmf",
		TPM:      c.ImageOf(n).SecureBoot,
		// No Talos version or schematic: the VM is updated before a rollout starts, so the
		// description would claim the new version on nodes a failed rollout never reached, and
		// every upgrade would first update every VM.
		Description: fmt.Sprintf("Talos %s %s of cluster %s. Managed by Pulumi (talos-proxmox); changes made here are overwritten.",
			n.Role, n.Name, c.Name),
	}

	vm.Disks = append(vm.Disks, Disk{Interface: "scsi0", DatastoreID: n.DatastoreID, SizeGiB: n.DiskSizeGiB, FromImage: true})
	for i, d := range n.DataDisks {
		vm.Disks = append(vm.Disks, Disk{
			Interface:   fmt.Sprintf("scsi%d", i+1),
			DatastoreID: d.DatastoreID,
			SizeGiB:     d.SizeGiB,
			Serial:      d.Serial,
		})
	}

	for i, d := range n.PCIDevices {
		vm.Hostpcis = append(vm.Hostpcis, Hostpci{
			Device:  fmt.Sprintf("hostpci%d", i),
			Mapping: d.Mapping,
			ID:      d.ID,
			PCIe:    d.PCIe,
			ROMBar:  d.ROMBar,
			XVGA:    d.XVGA,
		})
	}

	switch {
	case !c.Network.IPv4:
	case c.Network.DHCP:
		vm.IPv4Address = "dhcp"
	default:
		vm.IPv4Address = fmt.Sprintf("%s/%d", n.IP, c.Network.PrefixLength)
		vm.IPv4Gateway = c.Network.Gateway
	}

	if c.Network.IPv6 && n.IP6 != "" {
		vm.IPv6Address = fmt.Sprintf("%s/%d", n.IP6, c.Network.PrefixLength6)
		vm.IPv6Gateway = c.Network.Gateway6
	}

	return vm
}

// ResourceName is the name of a child resource: `<cluster resource name>-<suffix>`.
func ResourceName(component, suffix string) string {
	return component + "-" + strings.TrimPrefix(suffix, "-")
}
