package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// A Secure Boot cluster downloads the factory's Secure Boot image; a node without Secure Boot gets
// the plain image, downloaded once more on its host only; Secure Boot VMs get an EFI disk in setup
// mode and a TPM, the others neither (on SeaBIOS).
func TestSecureBootDownloadsAndFirmware(t *testing.T) {
	t.Parallel()

	c := cluster(t, func(in *spec.Input) {
		in.TalosVersion = "v1.14.1"
		in.Image.SecureBoot = new(true)
		in.Nodes["w-1"] = spec.NodeInput{HostNode: "pve2", Role: "worker", IP: "10.0.0.21", Image: &spec.NodeImageInput{SecureBoot: new(false)}}
	})
	p := Build(c)

	var keys []string
	for _, d := range p.Downloads {
		keys = append(keys, d.Key)

		sb := strings.HasSuffix(d.Key, "-secureboot")
		if got := strings.Contains(d.URL, "-amd64-secureboot.qcow2") && strings.Contains(d.FileName, "-nocloud-amd64-secureboot.qcow2"); got != sb {
			t.Errorf("download %s: URL %s, file %s (Secure Boot %v)", d.Key, d.URL, d.FileName, sb)
		}
	}

	if want := []string{"image-pve1-secureboot", "image-pve2", "image-pve2-secureboot"}; !slices.Equal(keys, want) {
		t.Fatalf("downloads %v, want %v", keys, want)
	}

	for _, v := range p.VMs {
		sb := v.Node.Name != "w-1"
		if v.EFIDisk != sb || v.TPM != sb || (v.Node.BIOS == "ovmf") != sb || strings.HasSuffix(p.Downloads[v.Download].Key, "-secureboot") != sb {
			t.Errorf("%s: EFI disk %v, TPM %v, BIOS %s, download %s (Secure Boot %v)", v.Node.Name, v.EFIDisk, v.TPM, v.Node.BIOS,
				p.Downloads[v.Download].Key, sb)
		}

		if got := slices.Contains(v.Node.Tags, spec.SecureBootTag); got != sb {
			t.Errorf("%s: tags %v (Secure Boot %v)", v.Node.Name, v.Node.Tags, sb)
		}

		if inst := c.ImageOf(v.Node).InstallerImage; strings.Contains(inst, "/nocloud-installer-secureboot/") != sb {
			t.Errorf("%s: installer %s (Secure Boot %v)", v.Node.Name, inst, sb)
		}
	}

	if n := len(c.Schematics()); n != 1 || len(c.Images()) != 2 {
		t.Errorf("%d schematics and %d images, want 1 schematic in 2 images (with and without Secure Boot)", n, len(c.Images()))
	}
}
