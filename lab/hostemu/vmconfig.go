package hostemu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// What the guest sees of its VM's configuration.

// systemUUID is the SMBIOS system UUID the guest reads (/sys/class/dmi/id/product_uuid): smbios1's
// uuid, which PVE generates at creation, in lower case as Linux prints it.
func systemUUID(config map[string]string) string {
	for _, kv := range strings.Split(config["smbios1"], ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(kv), "uuid="); ok {
			return strings.ToLower(v)
		}
	}

	return ""
}

// dataDisks are the VM's extra SCSI disks with their serials, as the guest would see them.
func dataDisks(config map[string]string) []talosemu.Disk {
	var out []talosemu.Disk

	for i := 1; i < 31; i++ {
		spec, ok := config[fmt.Sprintf("scsi%d", i)]
		if !ok {
			continue
		}

		d := talosemu.Disk{}
		for _, kv := range strings.Split(spec, ",") {
			if v, ok := strings.CutPrefix(kv, "serial="); ok {
				d.Serial = v
			}

			if kv == "ssd=1" {
				d.SSD = true
			}
		}

		out = append(out, d)
	}

	return out
}

// bootImage is the Talos version and schematic of the image the VM boots: read from the lab image
// its disk (or CD-ROM) was imported from, as factoryfake wrote it. Zero when none is found (the
// node then runs talosemu's default version).
func (c *Controller) bootImage(e pvefake.Event) talosemu.Installed {
	c.mu.Lock()
	fake := c.fake
	c.mu.Unlock()

	if fake == nil {
		return talosemu.Installed{}
	}

	keys := make([]string, 0, len(e.Config))
	for k := range e.Config {
		keys = append(keys, k)
	}

	slices.Sort(keys)

	for _, k := range keys {
		if !strings.HasPrefix(k, "scsi") && !strings.HasPrefix(k, "ide") && !strings.HasPrefix(k, "sata") && !strings.HasPrefix(k, "virtio") {
			continue
		}

		volid, _, _ := strings.Cut(e.Config[k], ",")
		storage, _, ok := strings.Cut(volid, ":")

		if !ok {
			continue
		}

		for _, v := range fake.Volumes(e.Node, storage) {
			if v.VolID != volid {
				continue
			}

			if got := parseLabImage(v.Data); got.Version != "" {
				return got
			}
		}
	}

	return talosemu.Installed{}
}

// parseLabImage reads "schematic <id>" and "version <v>" lines from factoryfake's image header.
func parseLabImage(data []byte) talosemu.Installed {
	var out talosemu.Installed

	head := string(data[:min(len(data), 16<<10)])
	if !strings.Contains(head, "talos-proxmox lab image") {
		return out
	}

	for _, line := range strings.Split(head, "\n") {
		if v, ok := strings.CutPrefix(line, "schematic "); ok {
			out.Schematic = v
		}

		if v, ok := strings.CutPrefix(line, "version "); ok {
			out.Version = v
		}

		// The factory names Secure Boot assets <platform>-<arch>-secureboot.<ext>.
		if v, ok := strings.CutPrefix(line, "file "); ok {
			out.SecureBoot = strings.Contains(v, "-secureboot.")
		}
	}

	return out
}

// memoryBytes is the VM's configured memory ("memory" in MiB), 0 if unset.
func memoryBytes(config map[string]string) uint64 {
	mib, err := strconv.ParseUint(config["memory"], 10, 64)
	if err != nil {
		return 0
	}

	return mib << 20
}

// firmware is what the VM's firmware makes of the image it boots, as QEMU with Proxmox' OVMF does:
// the security state the node reports, or why nothing boots. A Secure Boot image holds only a
// signed systemd-boot and UKI (no BIOS boot loader); OVMF with an EFI disk whose keys are
// pre-enrolled (Microsoft's and the distribution's) refuses it, since Sidero Labs signs Talos; with
// an EFI disk in setup mode (no keys) the image enrols Talos' keys on its first boot from Talos v1.14
// on (systemd-boot's secure-boot-enroll if-safe) and boots with Secure Boot on; before v1.14 it boots
// in setup mode, Secure Boot off. Without an EFI disk OVMF keeps no variables: nothing enrolled
// persists, setup mode. A plain image boots on either firmware, Secure Boot off.
func firmware(config map[string]string, img talosemu.Installed) (talosemu.Security, string) {
	sec := talosemu.Security{TPM: config["tpmstate0"] != ""}

	if !img.SecureBoot {
		return sec, ""
	}

	if config["bios"] != "ovmf" {
		return sec, "SeaBIOS finds no boot loader on a Secure Boot image (UEFI only); set bios to ovmf"
	}

	efi, ok := config["efidisk0"]
	if ok && strings.Contains(efi, "pre-enrolled-keys=1") {
		return sec, "OVMF with pre-enrolled keys refuses Talos' boot loader (signed by Sidero Labs, not Microsoft): Access Denied"
	}

	sec.UKI, sec.SetupMode = true, true

	if ok && minorOf(img.Version) >= 14 {
		sec.SecureBoot, sec.SetupMode = true, false
	}

	return sec, ""
}

// minorOf is the minor of a Talos version ("v1.14.1" → 14), 0 when it is not one.
func minorOf(v string) int {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0
	}

	m, _ := strconv.Atoi(parts[1])

	return m
}
