package pvefake

import (
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// createTalosVM creates VM 100 the way bpg does for our component: disk imported from the
// downloaded image, cloud-init drive on ide2, EFI disk, agent, tags, a NIC without MAC.
func createTalosVM(t *testing.T, c *apiClient, extra ...string) {
	t.Helper()

	params := form(
		"vmid", "100", "name", "cp-1", "cores", "2", "sockets", "1", "memory", "4096",
		"agent", "enabled=1,fstrim_cloned_disks=0,type=virtio", "bios", "ovmf", "machine", "q35",
		"scsihw", "virtio-scsi-pci", "ostype", "l26", "onboot", "1", "tags", "talos;cluster-a,lab",
		"scsi0", "file=local-lvm:0,import-from=local:import/talos.qcow2,size=21474836480,discard=on,ssd=1,",
		"efidisk0", "file=local-lvm:1,format=raw,efitype=4m,pre-enrolled-keys=0",
		"ide2", "file=local-lvm:cloudinit,format=raw",
		"ipconfig0", "gw=10.0.0.1,ip=10.0.0.11/24", "nameserver", "1.1.1.1 9.9.9.9",
		"net0", "model=virtio,bridge=vmbr0,firewall=0",
		"hostpci0", "mapping=gpu,pcie=1",
		"boot", "order=scsi0;net0",
	)
	for i := 0; i+1 < len(extra); i += 2 {
		params.Set(extra[i], extra[i+1])
	}

	upid := c.ok("POST", "nodes/pve1/qemu", params).data().(string)
	if exit := c.waitTask("pve1", upid); exit != "OK" {
		t.Fatalf("create: %s", exit)
	}
}

func TestVMCreateImportsDisksAndStoresConfigLikePVE(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	c := newClient(t, s)

	if _, err := s.AddFile("pve1", "local", "import/talos.qcow2", QCOW2Image(1<<30)); err != nil {
		t.Fatal(err)
	}

	createTalosVM(t, c)

	conf := c.ok("GET", "nodes/pve1/qemu/100/config", nil).dataMap(t)
	want := map[string]any{
		"scsi0":     "local-lvm:vm-100-disk-0,discard=on,size=1G,ssd=1",
		"efidisk0":  "local-lvm:vm-100-disk-1,efitype=4m,pre-enrolled-keys=0,size=4M",
		"ide2":      "local-lvm:vm-100-cloudinit,media=cdrom",
		"tags":      "cluster-a;lab;talos",
		"cores":     float64(2),
		"onboot":    float64(1),
		"memory":    "4096",
		"ipconfig0": "gw=10.0.0.1,ip=10.0.0.11/24",
		"hostpci0":  "mapping=gpu,pcie=1",
	}

	for k, v := range want {
		if conf[k] != v {
			t.Errorf("config %s = %#v, want %#v", k, conf[k], v)
		}
	}

	if net0, _ := conf["net0"].(string); !strings.HasPrefix(net0, "virtio=BC:24:11:") || !strings.HasSuffix(net0, ",bridge=vmbr0,firewall=0") {
		t.Errorf("net0 = %q", net0)
	}

	for _, k := range []string{"smbios1", "vmgenid", "meta", "digest"} {
		if conf[k] == nil {
			t.Errorf("config lacks %s", k)
		}
	}

	// import-from is resized by bpg afterwards
	upid := c.ok("PUT", "nodes/pve1/qemu/100/resize", form("disk", "scsi0", "size", "21474836480")).data().(string)
	if exit := c.waitTask("pve1", upid); exit != "OK" {
		t.Fatalf("resize: %s", exit)
	}

	vols := s.Volumes("pve1", "local-lvm")
	if len(vols) != 3 || vols[0].VolID != "local-lvm:vm-100-cloudinit" || vols[1].Size != 20<<30 {
		t.Fatalf("volumes = %+v", vols)
	}

	upid = c.ok("PUT", "nodes/pve1/qemu/100/resize", form("disk", "scsi0", "size", "10G")).data().(string)
	if exit := c.waitTask("pve1", upid); exit != "shrinking disks is not supported" {
		t.Fatalf("shrink: %q", exit)
	}

	item := c.ok("GET", "nodes/pve1/storage/local-lvm/content/"+url.PathEscape("local-lvm:vm-100-disk-0"), nil).dataMap(t)
	if item["format"] != "raw" || item["size"] != float64(20<<30) {
		t.Errorf("content item = %v", item)
	}
}

func TestVMCreateChecks(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	c := newClient(t, s)
	createTalosVM(t, c, "scsi0", "local-lvm:8")

	cases := []struct {
		params url.Values
		code   int
		reason string
	}{
		{form("vmid", "100"), 500, "VM 100 already exists on node 'pve1'"},
		{form("vmid", "101", "scsi0", "nope:8"), 500, "storage 'nope' does not exist"},
		{form("vmid", "101", "scsi0", "local:8"), 400, "Parameter verification failed."},
		{form("vmid", "101", "pool", "p1"), 403, "Permission check failed (pool 'p1' does not exist)"},
		{form("vmid", "101", "hostpci0", "host=0000:01:00.0"), 500, "only root can set 'hostpci0' config for non-mapped devices"},
		{form("vmid", "101", "name", "not a name"), 400, "Parameter verification failed."},
	}

	for _, tc := range cases {
		r := c.do("POST", "nodes/pve1/qemu", tc.params)
		if r.Code != tc.code || r.Reason != tc.reason {
			t.Errorf("%v: %d %q, want %d %q (%v)", tc.params, r.Code, r.Reason, tc.code, tc.reason, r.Body)
		}
	}

	upid := c.ok("POST", "nodes/pve1/qemu", form("vmid", "102", "scsi0", "local-lvm:0,import-from=local:import/missing.qcow2")).data().(string)
	if exit := c.waitTask("pve1", upid); exit != "create failed - volume 'local:import/missing.qcow2' does not exist" {
		t.Fatalf("missing import source: %q", exit)
	}

	if _, ok := s.VM(102); ok {
		t.Fatal("failed create left a VM")
	}
}

func TestVMLifecycleEventsAgentAndDelete(t *testing.T) {
	t.Parallel()

	var mu sync.Mutex
	var events []Event

	s := start(t, Options{OnEvent: func(e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	c := newClient(t, s)
	createTalosVM(t, c, "scsi0", "local-lvm:8", "ipconfig0", "ip=dhcp")

	agent := "nodes/pve1/qemu/100/agent/network-get-interfaces"
	if r := c.do("GET", agent, nil); r.Reason != "VM 100 is not running" {
		t.Fatalf("agent of a stopped VM: %d %q", r.Code, r.Reason)
	}

	c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string))

	if st := c.ok("GET", "nodes/pve1/qemu/100/status/current", nil).dataMap(t); st["status"] != "running" || st["agent"] != float64(1) {
		t.Fatalf("status = %v", st)
	}

	if r := c.do("GET", agent, nil); r.Reason != "QEMU guest agent is not running" {
		t.Fatalf("agent before an address is known: %d %q", r.Code, r.Reason)
	}

	s.SetGuestAddress(100, netip.MustParsePrefix("10.0.0.57/24"))

	res := c.ok("GET", agent, nil).dataMap(t)["result"].([]any)
	eth0 := res[1].(map[string]any)
	addr := eth0["ip-addresses"].([]any)[0].(map[string]any)

	if eth0["name"] != "eth0" || addr["ip-address"] != "10.0.0.57" || addr["prefix"] != float64(24) {
		t.Fatalf("interfaces = %v", res)
	}

	if exit := c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string)); exit != "VM 100 already running" {
		t.Fatalf("second start: %q", exit)
	}

	if r := c.do("DELETE", "nodes/pve1/qemu/100", form("purge", "1")); r.Reason != "VM 100 is running - destroy failed" {
		t.Fatalf("delete running: %d %q", r.Code, r.Reason)
	}

	c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu/100/status/stop", nil).data().(string))
	c.waitTask("pve1", c.ok("DELETE", "nodes/pve1/qemu/100/", form("destroy-unreferenced-disks", "1", "purge", "1")).data().(string))

	if r := c.do("GET", "nodes/pve1/qemu/100/status/current", nil); r.Code != 500 || !strings.Contains(r.Reason, "does not exist") {
		t.Fatalf("status after delete: %d %q", r.Code, r.Reason)
	}

	if vols := s.Volumes("pve1", "local-lvm"); len(vols) != 0 {
		t.Fatalf("volumes left: %+v", vols)
	}

	// The call log counts VM creates and deletes by route, refused ones too (what the e2e tests
	// read to tell that an `up` created or deleted no VM); the task list holds those that ran.
	if creates, deletes := s.CallCount("POST /nodes/{node}/qemu"), s.CallCount("DELETE /nodes/{node}/qemu/{vmid}"); creates != 1 || deletes != 2 {
		t.Fatalf("the call log counts %d VM creates and %d deletes, want 1 and 2 (one refused)", creates, deletes)
	}

	var tasks []string
	for _, task := range s.Tasks() {
		if task.Type == "qmcreate" || task.Type == "qmdestroy" {
			tasks = append(tasks, task.Type)
		}
	}

	if strings.Join(tasks, ",") != "qmcreate,qmdestroy" {
		t.Fatalf("VM tasks = %v", tasks)
	}

	_ = s.Close() // drains the event queue

	var types []string
	for _, e := range events {
		types = append(types, string(e.Type))
	}

	if strings.Join(types, ",") != "created,started,stopped,deleted" {
		t.Fatalf("events = %v", types)
	}

	started := events[1]
	if started.Name != "cp-1" || started.IPConfig0 != "ip=dhcp" || started.Nameserver != "1.1.1.1 9.9.9.9" ||
		!started.AgentEnabled || !strings.HasPrefix(started.MAC, "BC:24:11:") || started.Node != "pve1" {
		t.Fatalf("started event = %+v", started)
	}
}

func TestConfigUpdateDeleteAndNextID(t *testing.T) {
	t.Parallel()

	s := start(t, Options{Pools: []string{"lab"}})
	c := newClient(t, s)

	if id := c.ok("GET", "cluster/nextid", nil).data(); id != "100" {
		t.Fatalf("nextid = %v", id)
	}

	createTalosVM(t, c, "scsi0", "local-lvm:8", "pool", "lab")

	if id := c.ok("GET", "cluster/nextid", nil).data(); id != "101" {
		t.Fatalf("nextid = %v", id)
	}

	if r := c.do("GET", "cluster/nextid", form("vmid", "100")); r.Code != 400 || r.Body["errors"].(map[string]any)["vmid"] != "VM 100 already exists\n" {
		t.Fatalf("nextid of a used id: %d %v", r.Code, r.Body)
	}

	c.ok("PUT", "nodes/pve1/qemu/100/config", form("delete", "ide2,tags", "scsi1", "local-lvm:2", "description", "x"))

	conf := c.ok("GET", "nodes/pve1/qemu/100/config", nil).dataMap(t)
	if conf["ide2"] != nil || conf["tags"] != nil || conf["scsi1"] != "local-lvm:vm-100-disk-2,size=2G" || conf["description"] != "x" {
		t.Fatalf("config = %v", conf)
	}

	pools := c.ok("GET", "pools", form("poolid", "lab")).dataList(t)
	members := pools[0].(map[string]any)["members"].([]any)

	if len(members) != 1 || members[0].(map[string]any)["id"] != "qemu/100" {
		t.Fatalf("pool = %v", pools)
	}

	res := c.ok("GET", "cluster/resources", form("type", "vm")).dataList(t)
	if vm := res[0].(map[string]any); vm["id"] != "qemu/100" || vm["node"] != "pve1" || vm["pool"] != "lab" {
		t.Fatalf("resources = %v", res)
	}
}

// A stop or destroy task finishes only once the lab has reacted to it, as on Proxmox VE, where the
// task ends when the QEMU process is gone: a client that sees "stopped OK" must not reach the old
// guest any more.
func TestStopAndDestroyTasksFinishAfterTheGuestIsGone(t *testing.T) {
	t.Parallel()

	release := make(chan struct{})

	s := start(t, Options{Latency: 5 * time.Millisecond, OnEvent: func(e Event) {
		if e.Type == EventStopped || e.Type == EventDeleted {
			<-release
		}
	}})
	t.Cleanup(func() { close(release) }) // before the server's Close drains the event queue
	c := newClient(t, s)
	createTalosVM(t, c, "scsi0", "local-lvm:8")
	c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string))

	for _, step := range []struct{ method, path string }{
		{"POST", "nodes/pve1/qemu/100/status/stop"},
		{"DELETE", "nodes/pve1/qemu/100"},
	} {
		upid := c.ok(step.method, step.path, nil).data().(string)
		status := "nodes/pve1/tasks/" + url.PathEscape(upid) + "/status"

		time.Sleep(100 * time.Millisecond) // far past the task's latency

		if st := c.ok("GET", status, nil).dataMap(t); st["status"] != "running" {
			t.Fatalf("%s %s finished while the guest still ran: %v", step.method, step.path, st)
		}

		release <- struct{}{}

		if exit := c.waitTask("pve1", upid); exit != "OK" {
			t.Fatalf("%s %s: %s", step.method, step.path, exit)
		}
	}
}
