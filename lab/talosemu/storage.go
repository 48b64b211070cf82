package talosemu

import (
	"context"
	"fmt"

	storageapi "github.com/siderolabs/talos/pkg/machinery/api/storage"
	"google.golang.org/protobuf/types/known/emptypb"
)

// storageService is the node's StorageService. Its Disks call is the maintenance-mode probe of the
// Talos Terraform provider: it works with and without a configuration.
type storageService struct {
	storageapi.UnimplementedStorageServiceServer

	node *Node
}

// Disks lists /dev/sda (the boot disk) and the data disks from Options, the way storaged reports
// the SCSI disks of a Proxmox VM on a virtio-scsi controller.
func (s *storageService) Disks(context.Context, *emptypb.Empty) (*storageapi.DisksResponse, error) {
	return &storageapi.DisksResponse{Messages: []*storageapi.Disks{{Disks: s.node.disks()}}}, nil
}

func (n *Node) disks() []*storageapi.Disk {
	installed := n.snapshot().active != nil
	disks := []*storageapi.Disk{proxmoxDisk(0, Disk{SizeBytes: n.opts.SystemDiskSizeBytes}, installed)}

	for i, d := range n.opts.DataDisks {
		disks = append(disks, proxmoxDisk(i+1, d, false))
	}

	return disks
}

// proxmoxDisk describes SCSI disk number index (scsiN in Proxmox) as storaged would.
func proxmoxDisk(index int, d Disk, system bool) *storageapi.Disk {
	model := d.Model
	if model == "" {
		model = "QEMU HARDDISK"
	}

	kind := storageapi.Disk_HDD // QEMU disks are rotational unless ssd=1
	if d.SSD {
		kind = storageapi.Disk_SSD
	}

	return &storageapi.Disk{
		DeviceName: "/dev/" + scsiDeviceName(index),
		Model:      model,
		Size:       d.SizeBytes,
		Serial:     d.Serial,
		Modalias:   "scsi:t-0x00",
		Type:       kind,
		BusPath:    fmt.Sprintf("/pci0000:00/0000:00:05.0/0000:01:01.0/virtio1/host2/target2:0:%d/2:0:%d:0", index, index),
		SystemDisk: system,
		Subsystem:  "/sys/class/block",
	}
}

// scsiDeviceName is sda, sdb, …, sdz, sdaa, … for index 0, 1, …
func scsiDeviceName(index int) string {
	name := ""
	for i := index + 1; i > 0; i = (i - 1) / 26 {
		name = string(rune('a'+(i-1)%26)) + name
	}

	return "sd" + name
}
