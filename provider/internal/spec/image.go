package spec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/imagefactory"
)

func buildImage(p *problems, in ImageInput, c *Cluster) {
	img := Image{
		FactoryURL:      strings.TrimRight(in.FactoryURL, "/"),
		Platform:        in.Platform,
		Arch:            in.Arch,
		DatastoreID:     in.DatastoreID,
		SharedDatastore: in.SharedDatastore != nil && *in.SharedDatastore,
		ContentType:     ContentType(in.ContentType),
		SecureBoot:      in.SecureBoot != nil && *in.SecureBoot,
	}

	if img.SecureBoot {
		checkSecureBootVersion(p, "image.secureBoot", c.TalosVersion)
	}

	if img.FactoryURL == "" {
		img.FactoryURL = Defaults.FactoryURL
	}

	if _, err := imagefactory.FactoryHost(img.FactoryURL); err != nil {
		p.errorf("image.factoryUrl", "%v", err)
	}

	if img.Platform == "" {
		img.Platform = Defaults.Platform
	} else if img.Platform != "nocloud" && img.Platform != "metal" {
		p.errorf("image.platform", "%q is not supported; use \"nocloud\" (static addresses through Proxmox cloud-init) or \"metal\" (DHCP only)", img.Platform)
	}

	if img.Arch == "" {
		img.Arch = Defaults.Arch
	} else if img.Arch != "amd64" && img.Arch != "arm64" {
		p.errorf("image.arch", "%q is not a Talos architecture; use \"amd64\" or \"arm64\"", img.Arch)
	}

	if img.DatastoreID == "" {
		img.DatastoreID = Defaults.ImageDatastoreID
	} else if !storageIDRe.MatchString(img.DatastoreID) {
		p.errorf("image.datastoreId", "%q is not a Proxmox storage id; use e.g. \"local\"", img.DatastoreID)
	}

	switch img.ContentType {
	case "":
		img.ContentType = Defaults.ContentType
	case ContentImport, ContentISO:
	default:
		p.errorf("image.contentType", "%q is not supported; use \"import\" (qcow2 imported through the Proxmox API, no SSH, PVE 8.4+) or \"iso\" (raw image imported over SSH)", in.ContentType)
	}

	if s, ok := buildSchematic(p, "image", in.Schematic, in.Extensions); ok {
		img = img.withSchematic(s, in.Schematic != "", c.TalosVersion)
		img.ExtensionPaths = extensionPaths("image", s, in.Schematic != "", in.Extensions)
	}

	c.Image = img
}

// buildSchematic resolves the schematic of the image at path ("image", or a node's
// "nodes.<n>.image"): schematic when given, else one of extensions (nil: the defaults). Not ok
// when it is invalid (the problem is reported).
func buildSchematic(p *problems, at, schematic string, extensions []string) (s imagefactory.Schematic, ok bool) {
	var err error

	if schematic != "" {
		if extensions != nil {
			p.warnf(at+".extensions", "is ignored because %s.schematic is set; list the extensions in the schematic", at)
		}

		s, err = imagefactory.Parse(schematic)
		if err != nil {
			p.errorf(at+".schematic", "%v; write an Image Factory schematic such as \"customization:\\n  systemExtensions:\\n    officialExtensions: [siderolabs/qemu-guest-agent]\"", err)
			return s, false
		}
	} else {
		exts := extensions
		if exts == nil {
			exts = Defaults.Extensions
		}

		seen := map[string]bool{}
		bad := false

		for i, e := range exts {
			path := fmt.Sprintf("%s.extensions[%d]", at, i)
			switch {
			case !extensionRe.MatchString(e):
				p.errorf(path, "%q is not an official extension name; use the form \"siderolabs/qemu-guest-agent\"", e)
				bad = true
			case seen[e]:
				p.errorf(path, "%q is listed twice; list each extension once", e)
				bad = true
			}
			seen[e] = true
		}

		if bad {
			return s, false
		}

		if s, err = imagefactory.FromExtensions(exts); err != nil {
			p.errorf(at+".extensions", "%v", err)
			return s, false
		}
	}

	return s, true
}

// extensionPaths are the properties that put each extension of schematic s (built at path "image"
// or "nodes.<n>.image") in the image: its entry of extensions, the whole schematic, or, for the
// default extensions, the extensions property itself.
func extensionPaths(at string, s imagefactory.Schematic, custom bool, extensions []string) map[string]string {
	out := map[string]string{}

	for _, e := range s.Extensions {
		switch i := slices.Index(extensions, e); {
		case custom:
			out[e] = at + ".schematic"
		case i >= 0:
			out[e] = fmt.Sprintf("%s.extensions[%d]", at, i)
		default:
			out[e] = at + ".extensions"
		}
	}

	return out
}

// withSchematic is img made of schematic s (custom: a whole one given, not made of extensions),
// with the installer of s for talosVersion ("" when unknown).
func (img Image) withSchematic(s imagefactory.Schematic, custom bool, talosVersion string) Image {
	img.SchematicYAML, img.SchematicID, img.Extensions, img.Custom = s.YAML, s.ID, s.Extensions, custom
	img.GuestAgent = s.HasExtension(imagefactory.GuestAgentExtension)

	return img.withInstaller(talosVersion)
}

// withInstaller is img with the installer of its schematic and Secure Boot for talosVersion (""
// when unknown).
func (img Image) withInstaller(talosVersion string) Image {
	img.InstallerImage = ""

	if talosVersion != "" && img.Platform != "" && img.SchematicID != "" {
		img.InstallerImage, _ = imagefactory.InstallerImage(img.FactoryURL, img.Platform, img.SchematicID, talosVersion, img.SecureBoot)
	}

	return img
}

// nodeImage is the image of a node: the cluster's, or with nodes.<n>.image its own schematic
// (same factory, platform, architecture and datastore) and the installer of that schematic.
func nodeImage(p *problems, path string, in *NodeImageInput, c *Cluster) Image {
	if in == nil {
		return c.Image
	}

	if in.Schematic == "" && in.Extensions == nil && in.SecureBoot == nil {
		p.errorf(path, "is empty; give extensions, a schematic or secureBoot for this node's image, or remove it to use the cluster's")
		return c.Image
	}

	img := c.Image
	if in.SecureBoot != nil {
		img.SecureBoot = *in.SecureBoot
		if img.SecureBoot && !c.Image.SecureBoot {
			checkSecureBootVersion(p, path+".secureBoot", c.TalosVersion)
		}
	}

	if in.Schematic == "" && in.Extensions == nil {
		return img.withInstaller(c.TalosVersion)
	}

	s, ok := buildSchematic(p, path, in.Schematic, in.Extensions)
	if !ok {
		return img.withInstaller(c.TalosVersion) // the cluster's schematic, the node's Secure Boot
	}

	img = img.withSchematic(s, in.Schematic != "", c.TalosVersion)
	img.ExtensionPaths = extensionPaths(path, s, in.Schematic != "", in.Extensions)

	// The QEMU agent setting of the VM follows the image: a change is a VM update the proxmoxve
	// provider applies by rebooting the VM, at once and outside the rolling upgrade.
	if img.GuestAgent != c.Image.GuestAgent {
		has := map[bool]string{true: "has", false: "lacks"}
		p.warnf(path, "the node's image %s %s and the cluster's %s it: the VM's QEMU agent setting differs, and changing it on "+
			"a running node reboots its VM at once, outside the rolling upgrade; keep the extension as in the cluster's image "+
			"unless the node is new", has[img.GuestAgent], imagefactory.GuestAgentExtension, has[c.Image.GuestAgent])
	}

	return img
}

// ImageOf is the image node n runs: its own (nodes.<n>.image), else the cluster's.
func (c *Cluster) ImageOf(n Node) Image {
	if n.Image.SchematicID == "" {
		return c.Image
	}

	return n.Image
}

// Images are the distinct images the nodes run, by schematic id and Secure Boot: the cluster's
// first (whether a node runs it or not: it is the cluster's schematic output), then the nodes'
// own in id order, without Secure Boot first.
func (c *Cluster) Images() []Image {
	out := []Image{c.Image}

	for _, n := range c.Nodes {
		img := c.ImageOf(n)
		if !slices.ContainsFunc(out, func(o Image) bool { return o.SchematicID == img.SchematicID && o.SecureBoot == img.SecureBoot }) {
			out = append(out, img)
		}
	}

	slices.SortStableFunc(out[1:], func(a, b Image) int {
		if d := strings.Compare(a.SchematicID, b.SchematicID); d != 0 {
			return d
		}

		return map[bool]int{false: 0, true: 1}[a.SecureBoot] - map[bool]int{false: 0, true: 1}[b.SecureBoot]
	})

	return out
}

// Schematics are the distinct schematics of the nodes' images (Images without Secure Boot
// twins): one registration each with the Image Factory.
func (c *Cluster) Schematics() []Image {
	var out []Image

	for _, img := range c.Images() {
		if !slices.ContainsFunc(out, func(o Image) bool { return o.SchematicID == img.SchematicID }) {
			out = append(out, img)
		}
	}

	return out
}
