package spec

import (
	"fmt"
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

	buildSchematic(p, in, &img)

	if c.TalosVersion != "" && img.SchematicID != "" && img.Platform != "" {
		img.InstallerImage, _ = imagefactory.InstallerImage(img.FactoryURL, img.Platform, img.SchematicID, c.TalosVersion)
	}

	c.Image = img
}

func buildSchematic(p *problems, in ImageInput, img *Image) {
	var (
		s   imagefactory.Schematic
		err error
	)

	if in.Schematic != "" {
		if in.Extensions != nil {
			p.warnf("image.extensions", "is ignored because image.schematic is set; list the extensions in the schematic")
		}

		s, err = imagefactory.Parse(in.Schematic)
		if err != nil {
			p.errorf("image.schematic", "%v; write an Image Factory schematic such as \"customization:\\n  systemExtensions:\\n    officialExtensions: [siderolabs/qemu-guest-agent]\"", err)
			return
		}
	} else {
		exts := in.Extensions
		if exts == nil {
			exts = Defaults.Extensions
		}

		seen := map[string]bool{}
		bad := false

		for i, e := range exts {
			path := fmt.Sprintf("image.extensions[%d]", i)
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
			return
		}

		if s, err = imagefactory.FromExtensions(exts); err != nil {
			p.errorf("image.extensions", "%v", err)
			return
		}
	}

	img.SchematicYAML = s.YAML
	img.SchematicID = s.ID
	img.Extensions = s.Extensions
	img.GuestAgent = s.HasExtension(imagefactory.GuestAgentExtension)
}
