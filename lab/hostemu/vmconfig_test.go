package hostemu

import (
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/factoryfake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// TestFirmwareDecidesSecureBoot is OVMF's and SeaBIOS' answer to each image and EFI disk, with the
// image header factoryfake writes (its file name says Secure Boot).
func TestFirmwareDecidesSecureBoot(t *testing.T) {
	t.Parallel()

	sb := func(version string) talosemu.Installed {
		return parseLabImage(factoryfake.Image("abc", version, "nocloud-amd64-secureboot.qcow2"))
	}
	plain := parseLabImage(factoryfake.Image("abc", "v1.14.1", "nocloud-amd64.qcow2"))

	if !sb("v1.14.1").SecureBoot || plain.SecureBoot || sb("v1.14.1").Version != "v1.14.1" {
		t.Fatalf("image headers: secure boot %+v, plain %+v", sb("v1.14.1"), plain)
	}

	setup := "local-lvm:vm-100-disk-1,efitype=4m,pre-enrolled-keys=0,size=4M"
	tpm := "local-lvm:vm-100-disk-2,size=4M,version=v2.0"

	for _, tc := range []struct {
		name    string
		config  map[string]string
		img     talosemu.Installed
		want    talosemu.Security
		refused bool
	}{
		{"secure boot image, setup mode, v1.14", map[string]string{"bios": "ovmf", "efidisk0": setup, "tpmstate0": tpm}, sb("v1.14.1"),
			talosemu.Security{SecureBoot: true, UKI: true, TPM: true}, false},
		{"secure boot image before v1.14 stays in setup mode", map[string]string{"bios": "ovmf", "efidisk0": setup}, sb("v1.13.4"),
			talosemu.Security{SetupMode: true, UKI: true}, false},
		{"no EFI disk keeps nothing enrolled", map[string]string{"bios": "ovmf"}, sb("v1.14.1"), talosemu.Security{SetupMode: true, UKI: true}, false},
		{"pre-enrolled keys refuse Talos", map[string]string{"bios": "ovmf", "efidisk0": "local-lvm:vm-1-disk-1,efitype=4m,pre-enrolled-keys=1"},
			sb("v1.14.1"), talosemu.Security{}, true},
		{"SeaBIOS cannot boot a Secure Boot image", map[string]string{"tpmstate0": tpm}, sb("v1.14.1"), talosemu.Security{TPM: true}, true},
		{"a plain image on OVMF", map[string]string{"bios": "ovmf", "efidisk0": setup, "tpmstate0": tpm}, plain, talosemu.Security{TPM: true}, false},
	} {
		got, why := firmware(tc.config, tc.img)
		if got != tc.want || (why != "") != tc.refused {
			t.Errorf("%s: %+v refused %q, want %+v refused %v", tc.name, got, why, tc.want, tc.refused)
		}
	}
}

// The guest's system UUID is smbios1's uuid, in lower case.
func TestSystemUUID(t *testing.T) {
	t.Parallel()

	for cfg, want := range map[string]string{
		"uuid=6F2C1B9E-3D0A-4E2B-9C1D-0A1B2C3D4E5F":                           "6f2c1b9e-3d0a-4e2b-9c1d-0a1b2c3d4e5f",
		"base64=1,sku=MlZDUFUtNEdC,uuid=6f2c1b9e-3d0a-4e2b-9c1d-0a1b2c3d4e5f": "6f2c1b9e-3d0a-4e2b-9c1d-0a1b2c3d4e5f",
		"": "",
	} {
		if got := systemUUID(map[string]string{"smbios1": cfg}); got != want {
			t.Errorf("smbios1 %q: %q, want %q", cfg, got, want)
		}
	}
}
