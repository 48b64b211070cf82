package pvecontract

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bpg/terraform-provider-proxmox/proxmox/api"
	"github.com/bpg/terraform-provider-proxmox/proxmox/nodes"
	"github.com/bpg/terraform-provider-proxmox/proxmox/nodes/storage"
	"github.com/bpg/terraform-provider-proxmox/proxmox/nodes/tasks"
	"github.com/bpg/terraform-provider-proxmox/proxmox/nodes/vms"
	"github.com/bpg/terraform-provider-proxmox/proxmox/types"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
)

func TestTokenAuthAndVersion(t *testing.T) {
	t.Parallel()

	l := newLab(t, pvefake.Options{})

	v, err := l.client.Version().Version(l.ctx)
	if err != nil {
		t.Fatal(err)
	}

	if v.Version.String() != "8.4.1" || !v.Version.SupportImportContentType() {
		t.Fatalf("version = %+v", v)
	}

	bad := bpgClient(t, l.fake.URL(), "root@pam!lab=00000000-0000-0000-0000-000000000000")
	_, err = bad.Version().Version(l.ctx)

	var httpErr *api.HTTPError
	if !errors.As(err, &httpErr) || httpErr.Code != 401 || httpErr.Message != "invalid token value!" {
		t.Fatalf("wrong token: %v", err)
	}

	list, err := l.client.Node("pve1").ListNodes(l.ctx)
	if err != nil || len(list) != 1 || list[0].Name != "pve1" {
		t.Fatalf("nodes = %v, %v", list, err)
	}
}

func TestNextID(t *testing.T) {
	t.Parallel()

	l := newLab(t, pvefake.Options{FirstVMID: 1000})

	id, err := l.client.Cluster().GetNextID(l.ctx, nil)
	if err != nil || *id != 1000 {
		t.Fatalf("next id = %v, %v", id, err)
	}

	if r := l.client.Node("pve1").VM(0).CreateVM(l.ctx, &vms.CreateRequestBody{VMID: 1000}); r.Err() != nil {
		t.Fatal(r.Err())
	}

	_, err = l.client.Cluster().GetNextID(l.ctx, ptr(1000))
	if err == nil || !strings.Contains(err.Error(), "received an HTTP 400 response - Reason: Parameter verification failed. (vmid: VM 1000 already exists)") {
		t.Fatalf("taken id: %v", err)
	}
}

func TestDownloadFileFlow(t *testing.T) {
	t.Parallel()

	l := newLab(t, pvefake.Options{})
	node := l.client.Node("pve1")
	url := l.images.URL + imagePath

	meta, err := node.GetQueryURLMetadata(l.ctx, &nodes.QueryURLMetadataGetRequestBody{URL: url, Verify: types.CustomBool(true).Pointer()})
	if err != nil {
		t.Fatal(err)
	}

	if *meta.Filename != "nocloud-amd64.qcow2" || *meta.Size != 4096 || *meta.Mimetype != "application/octet-stream" {
		t.Fatalf("metadata = %v %v %v", *meta.Filename, *meta.Size, *meta.Mimetype)
	}

	st := node.Storage("local")
	req := &storage.DownloadURLPostRequestBody{
		Node: ptr("pve1"), Storage: ptr("local"), Content: ptr("import"), URL: &url,
		FileName: ptr("talos-v1.11.5-nocloud-amd64.qcow2"), Verify: types.CustomBool(true).Pointer(),
	}

	if err := st.DownloadFileByURL(l.ctx, req); err != nil {
		t.Fatal(err)
	}

	files, err := st.ListDatastoreFiles(l.ctx, ptr("import"))
	if err != nil || len(files) != 1 || files[0].VolumeID != "local:import/talos-v1.11.5-nocloud-amd64.qcow2" || files[0].FileSize != 4096 {
		t.Fatalf("files = %v, %v", files, err)
	}

	// bpg's isErrFileAlreadyExists looks for this text to take the overwrite_unmanaged path.
	err = st.DownloadFileByURL(l.ctx, req)
	if err == nil || !strings.Contains(err.Error(), "refusing to override existing file") {
		t.Fatalf("second download: %v", err)
	}

	// the overwrite path deletes "<content>/<file>" relative to the storage
	if err := st.DeleteDatastoreFile(l.ctx, "import/talos-v1.11.5-nocloud-amd64.qcow2"); err != nil {
		t.Fatal(err)
	}

	if err := st.DeleteDatastoreFile(l.ctx, "local:import/talos-v1.11.5-nocloud-amd64.qcow2"); !errors.Is(err, api.ErrResourceDoesNotExist) {
		t.Fatalf("deleting a missing file: %v", err)
	}

	_, err = node.GetQueryURLMetadata(l.ctx, &nodes.QueryURLMetadataGetRequestBody{URL: l.images.URL + "/nope.qcow2"})
	if err == nil || !strings.Contains(err.Error(), "invalid server response: '404 Not Found'") {
		t.Fatalf("missing image: %v", err)
	}
}

// prepareImage downloads the Talos image to local:import like the download_file resource.
func (l *lab) prepareImage(t *testing.T) {
	t.Helper()

	url := l.images.URL + imagePath
	err := l.client.Node("pve1").Storage("local").DownloadFileByURL(l.ctx, &storage.DownloadURLPostRequestBody{
		Content: ptr("import"), URL: &url, FileName: ptr("talos-v1.11.5-nocloud-amd64.qcow2"),
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestVMLifecycle(t *testing.T) {
	t.Parallel()

	l := newLab(t, pvefake.Options{})
	l.prepareImage(t)

	vm := l.client.Node("pve1").VM(100)
	body := talosVMRequest(100, "10.0.0.11/24")

	upid, err := l.client.Node("pve1").VM(0).CreateVMAsync(l.ctx, body)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := tasks.ParseTaskID(*upid); err != nil {
		t.Fatalf("ParseTaskID(%q): %v", *upid, err)
	}

	if r := vm.Tasks().WaitForTask(l.ctx, *upid); r.Err() != nil {
		t.Fatal(r.Err())
	}

	// vmCreateCustom resizes import_from disks to the requested size afterwards
	if r := vm.ResizeVMDisk(l.ctx, &vms.ResizeDiskRequestBody{Disk: "scsi0", Size: *body.CustomStorageDevices["scsi0"].Size}); r.Err() != nil {
		t.Fatal(r.Err())
	}

	if r := vm.StartVM(l.ctx, 60); r.Err() != nil {
		t.Fatal(r.Err())
	}

	if err := vm.WaitForVMStatus(l.ctx, "running"); err != nil {
		t.Fatal(err)
	}

	// vmRead: find the node, read config and status
	nodeName, err := l.client.Cluster().GetVMNodeName(l.ctx, 100)
	if err != nil || *nodeName != "pve1" {
		t.Fatalf("node of VM 100 = %v, %v", nodeName, err)
	}

	status, err := vm.GetVMStatus(l.ctx)
	if err != nil || status.Status != "running" || status.AgentEnabled == nil || !*status.AgentEnabled || *status.Name != "cp-1" {
		t.Fatalf("status = %+v, %v", status, err)
	}

	conf, err := vm.GetVM(l.ctx)
	if err != nil {
		t.Fatal(err)
	}

	checkConfig(t, l, conf)

	pools, err := l.client.Pool().ListPools(l.ctx)
	if err != nil || len(pools) != 0 {
		t.Fatalf("pools = %v, %v", pools, err)
	}

	ifaces, err := vm.WaitForNetworkInterfacesFromVMAgent(l.ctx, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}

	if got := (*ifaces.Result)[1]; got.Name != "eth0" || (*got.IPAddresses)[0].Address != "10.0.0.11" ||
		!strings.EqualFold(got.MACAddress, *conf.NetworkDevices["net0"].MACAddress) {
		t.Fatalf("agent interfaces = %+v", *ifaces.Result)
	}

	// vmDelete with stop_on_destroy: stop, delete, wait until the status call fails
	if r := vm.StopVM(l.ctx); r.Err() != nil {
		t.Fatal(r.Err())
	}

	if err := vm.WaitForVMStatus(l.ctx, "stopped"); err != nil {
		t.Fatal(err)
	}

	if r := vm.DeleteVM(l.ctx, true, true); r.Err() != nil {
		t.Fatal(r.Err())
	}

	err = vm.WaitForVMStatus(l.ctx, "")
	if !errors.Is(err, api.ErrResourceDoesNotExist) || !strings.Contains(err.Error(), "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist") {
		t.Fatalf("status after delete: %v", err)
	}

	if _, err := vm.GetVM(l.ctx); !errors.Is(err, api.ErrResourceDoesNotExist) {
		t.Fatalf("config after delete: %v", err)
	}

	if _, err := l.client.Cluster().GetVMNodeName(l.ctx, 100); err == nil {
		t.Fatal("VM 100 still listed in cluster resources")
	}

	if vols := l.fake.Volumes("pve1", "local-lvm"); len(vols) != 0 {
		t.Fatalf("volumes left: %+v", vols)
	}
}

// checkConfig reads the configuration back through bpg's decoders.
func checkConfig(t *testing.T, l *lab, conf *vms.GetResponseData) {
	t.Helper()

	scsi0 := conf.StorageDevices["scsi0"]
	if scsi0 == nil || scsi0.FileVolume != "local-lvm:vm-100-disk-0" || scsi0.Size.InGigabytes() != 20 ||
		*scsi0.Discard != "on" || !bool(*scsi0.SSD) || *scsi0.AIO != "io_uring" || scsi0.ImportFrom != nil {
		t.Fatalf("scsi0 = %+v", scsi0)
	}

	if ide2 := conf.StorageDevices["ide2"]; ide2 == nil || !ide2.IsCloudInitDrive(100) || *ide2.Media != "cdrom" {
		t.Fatalf("ide2 = %+v", ide2)
	}

	// no format in the config: bpg asks the storage (disk.Read)
	file, err := l.client.Node("pve1").Storage("local-lvm").GetDatastoreFile(l.ctx, scsi0.FileVolume)
	if err != nil || *file.FileFormat != "raw" || *file.FileSize != 20<<30 {
		t.Fatalf("datastore file = %+v, %v", file, err)
	}

	if conf.EFIDisk == nil || conf.EFIDisk.FileVolume != "local-lvm:vm-100-disk-1" || *conf.EFIDisk.Type != "4m" {
		t.Fatalf("efidisk0 = %+v", conf.EFIDisk)
	}

	ip := conf.IPConfigs["ipconfig0"]
	if ip == nil || *ip.IPv4 != "10.0.0.11/24" || *ip.GatewayIPv4 != "10.0.0.1" || *conf.CloudInitDNSServer != "1.1.1.1 9.9.9.9" {
		t.Fatalf("cloud-init = %+v %v", ip, conf.CloudInitDNSServer)
	}

	net0 := conf.NetworkDevices["net0"]
	if net0 == nil || net0.Model != "virtio" || *net0.Bridge != "vmbr0" || !strings.HasPrefix(*net0.MACAddress, "BC:24:11:") {
		t.Fatalf("net0 = %+v", net0)
	}

	if pci := conf.PCIDevices["hostpci0"]; pci == nil || *pci.Mapping != "gpu" || !bool(*pci.PCIExpress) {
		t.Fatalf("hostpci0 = %+v", pci)
	}

	if !bool(*conf.Agent.Enabled) || *conf.Tags != "cluster-a;talos" || *conf.CPUCores != 2 ||
		conf.DedicatedMemory == nil || *conf.DedicatedMemory != 4096 || !bool(*conf.StartOnBoot) || *conf.BIOS != "ovmf" {
		t.Fatalf("config = %+v", conf)
	}
}

func TestAgentAddressForDHCP(t *testing.T) {
	t.Parallel()

	l := newLab(t, pvefake.Options{})
	vm := l.client.Node("pve1").VM(101)

	if r := vm.CreateVM(l.ctx, &vms.CreateRequestBody{
		VMID:            101,
		Agent:           &vms.CustomAgent{Enabled: types.CustomBool(true).Pointer()},
		CloudInitConfig: &vms.CustomCloudInitConfig{IPConfig: []vms.CustomCloudInitIPConfig{{IPv4: ptr("dhcp")}}},
	}); r.Err() != nil {
		t.Fatal(r.Err())
	}

	if r := vm.StartVM(l.ctx, 60); r.Err() != nil {
		t.Fatal(r.Err())
	}

	// bpg waits for a global unicast address, which a loopback one is not: the fake adds a
	// TEST-NET-2 stand-in after it, so bpg is satisfied and eth0's first address stays the
	// node's loopback address.
	l.fake.SetGuestAddress(101, netip.MustParsePrefix("127.0.0.11/8"))

	ifaces, err := vm.WaitForNetworkInterfacesFromVMAgent(l.ctx, 5*time.Second, nil)
	if err != nil {
		t.Fatalf("loopback address: %v", err)
	}

	eth0 := *(*ifaces.Result)[1].IPAddresses
	if len(eth0) != 2 || eth0[0].Address != "127.0.0.11" || eth0[1].Address != "198.51.100.11" {
		t.Fatalf("eth0 addresses = %+v", eth0)
	}

	l.fake.SetGuestAddress(101, netip.MustParsePrefix("10.0.0.57/24"))

	ifaces, err = vm.WaitForNetworkInterfacesFromVMAgent(l.ctx, 5*time.Second, &vms.WaitForIPConfig{IPv4: true})
	if err != nil || (*(*ifaces.Result)[1].IPAddresses)[0].Address != "10.0.0.57" {
		t.Fatalf("interfaces = %+v, %v", ifaces, err)
	}
}

func TestTaskFailureWording(t *testing.T) {
	t.Parallel()

	l := newLab(t, pvefake.Options{})
	vm := l.client.Node("pve1").VM(100)

	if r := vm.CreateVM(l.ctx, &vms.CreateRequestBody{VMID: 100}); r.Err() != nil {
		t.Fatal(r.Err())
	}

	l.fake.FailNextTask("POST /nodes/{node}/qemu/{vmid}/status/start", "start failed: QEMU exited with code 1")

	err := vm.StartVM(l.ctx, 60).Err()
	if err == nil || !strings.Contains(err.Error(), "failed to complete with exit code: start failed: QEMU exited with code 1") ||
		!strings.Contains(err.Error(), "TASK ERROR: start failed: QEMU exited with code 1") {
		t.Fatalf("start: %v", err)
	}

	// import_from of a file that was never downloaded
	body := talosVMRequest(102, "dhcp")

	err = l.client.Node("pve1").VM(0).CreateVM(l.ctx, body).Err()
	if err == nil || !strings.Contains(err.Error(), "exit code: create failed - volume 'local:import/talos-v1.11.5-nocloud-amd64.qcow2' does not exist") {
		t.Fatalf("create without image: %v", err)
	}

	if _, ok := l.fake.VM(102); ok {
		t.Fatal("a failed create left VM 102")
	}
}

func TestFaultKnobFailsWithoutSideEffect(t *testing.T) {
	t.Parallel()

	l := newLab(t, pvefake.Options{})
	l.prepareImage(t)
	vm := l.client.Node("pve1").VM(100)

	// CreateVMAsync does not retry: the injected error surfaces, and nothing was created
	l.fake.FailNext("POST /nodes/{node}/qemu", 1)

	_, err := l.client.Node("pve1").VM(0).CreateVMAsync(l.ctx, talosVMRequest(100, "dhcp"))

	var httpErr *api.HTTPError
	if !errors.As(err, &httpErr) || httpErr.Code < 500 {
		t.Fatalf("injected failure: %v", err)
	}

	if len(l.fake.VMs()) != 0 || len(l.fake.Volumes("pve1", "local-lvm")) != 0 {
		t.Fatal("the failed call had an effect")
	}

	// CreateVM retries transient 5xx answers (retry.IsTransientAPIError): one injected failure
	// costs one retry and still creates exactly one VM
	l.fake.FailNext("POST /nodes/{node}/qemu", 1)
	l.fake.ResetCalls()

	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()

	if r := l.client.Node("pve1").VM(0).CreateVM(ctx, talosVMRequest(100, "dhcp")); r.Err() != nil {
		t.Fatal(r.Err())
	}

	if n := l.fake.CallCount("POST /nodes/{node}/qemu"); n != 2 || len(l.fake.VMs()) != 1 {
		t.Fatalf("%d create calls, %d VMs", n, len(l.fake.VMs()))
	}

	if _, err := vm.GetVM(l.ctx); err != nil {
		t.Fatal(err)
	}
}
