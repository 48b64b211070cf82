package pvecontract

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/bpg/terraform-provider-proxmox/proxmox"
	"github.com/bpg/terraform-provider-proxmox/proxmox/api"
	"github.com/bpg/terraform-provider-proxmox/proxmox/nodes/vms"
	"github.com/bpg/terraform-provider-proxmox/proxmox/types"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
)

// imagePath is where the image stand-in serves the Talos disk image.
const imagePath = "/image/ce4c98/v1.11.5/nocloud-amd64.qcow2"

// imageVirtualSize is the virtual size in the served qcow2 header.
const imageVirtualSize = 1 << 30

// lab is one fake PVE, an image server and a bpg client talking to the fake.
type lab struct {
	fake   *pvefake.Server
	client proxmox.Client
	images *httptest.Server
	ctx    context.Context
}

func newLab(t *testing.T, opts pvefake.Options) *lab {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)

	if opts.Logf == nil {
		opts.Logf = t.Logf
	}

	fake, err := pvefake.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = fake.Close() })

	image := pvefake.QCOW2Image(imageVirtualSize)
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != imagePath {
			http.NotFound(w, r)
			return
		}

		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(image)))
		_, _ = w.Write(image)
	}))
	t.Cleanup(images.Close)

	return &lab{fake: fake, client: bpgClient(t, fake.URL(), fake.APIToken()), images: images, ctx: ctx}
}

// bpgClient builds the client the provider builds from PROXMOX_VE_ENDPOINT,
// PROXMOX_VE_API_TOKEN and PROXMOX_VE_INSECURE=true (default minimum TLS 1.3).
func bpgClient(t *testing.T, endpoint, token string) proxmox.Client {
	t.Helper()

	conn, err := api.NewConnection(endpoint, true, "")
	if err != nil {
		t.Fatal(err)
	}

	creds, err := api.NewCredentials("", "", "", token, "", "")
	if err != nil {
		t.Fatal(err)
	}

	apiClient, err := api.NewClient(creds, conn)
	if err != nil {
		t.Fatal(err)
	}

	return proxmox.NewClient(apiClient, nil, "")
}

func ptr[T any](v T) *T { return &v }

// talosVMRequest is the create body bpg's vmCreateCustom sends for the component's VM:
// provider defaults plus an import_from disk, a cloud-init drive on ide2, an EFI disk, the
// agent, a PCI mapping, tags and one NIC without MAC (proxmoxtf/resource/vm/vm.go).
func talosVMRequest(vmid int, ipconfig string) *vms.CreateRequestBody {
	disk := vms.CustomStorageDevice{
		AIO:         ptr("io_uring"),
		Backup:      types.CustomBool(true).Pointer(),
		Cache:       ptr("none"),
		DatastoreID: ptr("local-lvm"),
		Discard:     ptr("on"),
		FileID:      ptr(""),
		ImportFrom:  ptr("local:import/talos-v1.11.5-nocloud-amd64.qcow2"),
		IOThread:    types.CustomBool(false).Pointer(),
		Replicate:   types.CustomBool(true).Pointer(),
		Serial:      ptr(""),
		Size:        types.DiskSizeFromGigabytes(20),
		SSD:         types.CustomBool(true).Pointer(),
	}
	disk.FileVolume = "local-lvm:20"

	ipv4, gw := ipconfig, (*string)(nil)
	if ipconfig != "dhcp" {
		gw = ptr("10.0.0.1")
	}

	body := &vms.CreateRequestBody{
		ACPI:  types.CustomBool(true).Pointer(),
		Agent: &vms.CustomAgent{Enabled: types.CustomBool(true).Pointer(), TrimClonedDisks: types.CustomBool(false).Pointer(), Type: ptr("virtio")},
		BIOS:  ptr("ovmf"),
		Boot:  &vms.CustomBoot{Order: &[]string{"scsi0", "net0"}},
		CloudInitConfig: &vms.CustomCloudInitConfig{
			IPConfig:   []vms.CustomCloudInitIPConfig{{IPv4: &ipv4, GatewayIPv4: gw}},
			Nameserver: ptr("1.1.1.1 9.9.9.9"),
		},
		CPUCores:           ptr(int64(2)),
		CPUEmulation:       &vms.CustomCPUEmulation{Flags: &[]string{}, Type: "host"},
		CPUSockets:         ptr(int64(1)),
		DedicatedMemory:    ptr(4096),
		DeletionProtection: types.CustomBool(false).Pointer(),
		EFIDisk:            &vms.CustomEFIDisk{FileVolume: "local-lvm:1", Format: ptr("raw"), Type: ptr("4m"), PreEnrolledKeys: types.CustomBool(false).Pointer()},
		FloatingMemory:     ptr(0),
		KeyboardLayout:     ptr("en-us"),
		Machine:            ptr("q35"),
		Name:               ptr("cp-1"),
		NetworkDevices: vms.CustomNetworkDevices{{
			Enabled: true, Model: "virtio", Bridge: ptr("vmbr0"), Firewall: types.CustomBool(false).Pointer(),
		}},
		NUMAEnabled:         types.CustomBool(false).Pointer(),
		OSType:              ptr("l26"),
		PCIDevices:          vms.CustomPCIDevices{"hostpci0": {Mapping: ptr("gpu"), PCIExpress: types.CustomBool(true).Pointer()}},
		SCSIHardware:        ptr("virtio-scsi-pci"),
		StartOnBoot:         types.CustomBool(true).Pointer(),
		TabletDeviceEnabled: types.CustomBool(true).Pointer(),
		Tags:                ptr("cluster-a;talos"),
		Template:            types.CustomBool(false).Pointer(),
		VGADevice:           &vms.CustomVGADevice{Type: ptr("std")},
		VMID:                vmid,
	}
	body.AddCustomStorageDevice("scsi0", disk)
	body.AddCustomStorageDevice("ide2", vms.CustomStorageDevice{FileVolume: "local-lvm:cloudinit", Format: ptr("raw")})

	return body
}
