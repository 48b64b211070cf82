package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

func buildDataDisks(p *problems, path string, in []DataDiskInput, datastore string) []DataDisk {
	var out []DataDisk

	mounts := map[string]int{}

	for i, dd := range in {
		at := fmt.Sprintf("%s.dataDisks[%d]", path, i)
		disk := DataDisk{
			SizeGiB:     dd.SizeGiB,
			DatastoreID: firstString(dd.DatastoreID, datastore),
			MountPath:   dd.MountPath,
			Serial:      diskSerial(i, dd.MountPath),
		}

		if dd.SizeGiB < 1 {
			p.errorf(at+".sizeGib", "%d is not a disk size; use 1 or more GiB", dd.SizeGiB)
		}

		if dd.DatastoreID != "" && !storageIDRe.MatchString(dd.DatastoreID) {
			p.errorf(at+".datastoreId", "%q is not a Proxmox storage id; use e.g. \"local-lvm\"", dd.DatastoreID)
		}

		if dd.MountPath != "" {
			if why := checkMountPath(dd.MountPath); why != "" {
				p.errorf(at+".mountPath", "%q %s", dd.MountPath, why)
			} else if j, dup := mounts[dd.MountPath]; dup {
				p.errorf(at+".mountPath", "%q is also the mount path of dataDisks[%d]; mount each disk at its own path", dd.MountPath, j)
			}
			mounts[dd.MountPath] = i
		}

		out = append(out, disk)
	}

	if len(in) > 29 {
		p.errorf(path+".dataDisks", "has %d disks; a Proxmox VM has 30 SCSI slots and one holds the OS disk", len(in))
	}

	return out
}

// diskSerial identifies a data disk inside the VM. A mounted disk's serial derives from its
// mount path, so removing another disk from the list never points Talos at the wrong disk.
func diskSerial(index int, mountPath string) string {
	if mountPath == "" {
		return fmt.Sprintf("data-%d", index)
	}

	sum := sha256.Sum256([]byte(mountPath))

	return "data-" + hex.EncodeToString(sum[:4])
}

func buildPCIDevices(p *problems, path string, in []PCIDeviceInput, machine string) []PCIDevice {
	var out []PCIDevice

	for i, d := range in {
		at := fmt.Sprintf("%s.pciDevices[%d]", path, i)
		dev := PCIDevice{
			Mapping: d.Mapping,
			ID:      d.ID,
			PCIe:    firstBool(d.PCIe, strings.Contains(machine, "q35")),
			ROMBar:  firstBool(d.ROMBar, true),
			XVGA:    firstBool(d.XVGA, false),
		}

		switch {
		case d.Mapping == "" && d.ID == "":
			p.errorf(at, "sets neither mapping nor id; set mapping (a Proxmox resource mapping such as \"gpu\", works with API tokens) or id (e.g. \"0000:01:00.0\")")
		case d.Mapping != "" && d.ID != "":
			p.errorf(at, "sets both mapping and id; set only one (mapping is preferred: it works with API tokens)")
		case d.Mapping != "" && !pciMappingRe.MatchString(d.Mapping):
			p.errorf(at+".mapping", "%q is not a Proxmox resource mapping name; use e.g. \"gpu\"", d.Mapping)
		case d.ID != "" && !pciIDRe.MatchString(d.ID):
			p.errorf(at+".id", "%q is not a PCI address; use the form \"0000:01:00.0\"", d.ID)
		case d.ID != "":
			p.warnf(at+".id", "passing a PCI device by id needs the proxmoxve provider to log in as root@pam with a password (API tokens are refused); prefer a resource mapping")
		}

		if dev.PCIe && !strings.Contains(machine, "q35") {
			p.errorf(at+".pcie", "PCIe passthrough needs the q35 machine type, but nodeDefaults.vmMachine is %q; set pcie to false or use q35", machine)
		}

		out = append(out, dev)
	}

	if len(in) > 16 {
		p.errorf(path+".pciDevices", "has %d devices; Proxmox allows at most 16 (hostpci0 to hostpci15)", len(in))
	}

	return out
}
