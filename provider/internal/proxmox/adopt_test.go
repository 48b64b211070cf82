package proxmox

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// TestAdoptees: with secrets.bundle, a declared node's VM that the component did not make is
// adopted — found by vmId on any host, else by name on its hostNode — and imported until it
// carries an instance tag; the component's own VMs and VMs of other names or hosts are not; and
// without a bundle nothing is adopted.
func TestAdoptees(t *testing.T) {
	t.Parallel()

	c := &spec.Cluster{Name: "home", Secrets: &spec.Secrets{Known: true}, Nodes: []spec.Node{
		{Name: "cp-1", HostNode: "pve1"},
		{Name: "cp-2", HostNode: "pve2", VMID: 7002},
		{Name: "w-1", HostNode: "pve1"},
		{Name: "w-2", HostNode: "pve2"},
		{Name: "w-3", HostNode: "pve1"},
	}}
	inv := &Inventory{Nodes: []string{"pve1", "pve2"}, VMs: []vm.GetVirtualMachinesVm{
		{Name: "cp-1", NodeName: "pve1", VmId: 7001, Tags: []string{"talos", "kubernetes"}},
		{Name: "talos-cp-02", NodeName: "pve1", VmId: 7002, Tags: []string{"k8s"}},
		{Name: "w-1", NodeName: "pve1", VmId: 7003, Tags: []string{"home", "talos", "talos-i-00aa11bb"}},
		{Name: "w-2", NodeName: "pve1", VmId: 7004},
		{Name: "w-3", NodeName: "pve1", VmId: 7005, Tags: []string{"home", "talos", "talos-i-00aa11cc", AdoptedTag}},
		// Another cluster's w-2, by name on w-2's host: never taken.
		{Name: "w-2", NodeName: "pve2", VmId: 7006, Tags: []string{"prod", "talos", "talos-i-00aa11dd"}},
	}}

	got := inv.Adoptees(c)
	want := map[string]Adoptee{
		"cp-1": {Node: "cp-1", Host: "pve1", VMID: 7001, Import: true, Tags: []string{"talos", "kubernetes"}},
		"cp-2": {Node: "cp-2", Host: "pve1", VMID: 7002, Import: true, Tags: []string{"k8s"}},
		"w-3":  {Node: "w-3", Host: "pve1", VMID: 7005, Tags: []string{"home", "talos"}},
	}

	if len(got) != len(want) {
		t.Errorf("adoptees %v, want %v", got, want)
	}

	for n, w := range want {
		if !reflect.DeepEqual(got[n], w) {
			t.Errorf("%s: %+v, want %+v", n, got[n], w)
		}
	}

	if id := want["cp-1"].ImportID(); id != "pve1/7001" {
		t.Errorf("import id %s", id)
	}

	// cp-2's VM is on pve1 while the node says pve2: refused, naming the host it runs on; a
	// DHCP cluster cannot be adopted (its nodes are reached at the addresses they have).
	errs := AdopteeProblems(c, got)
	if len(errs) != 4 || !strings.Contains(errs[0].Error(), "nodes.cp-1.ip:") ||
		!strings.Contains(errs[1].Error(), "nodes.cp-2.hostNode: the adopted VM 7002 runs on pve1, not pve2; set hostNode: pve1") {
		t.Errorf("problems: %v", errs)
	}

	if err := inv.AdoptedWithoutBundle(c); err != nil {
		t.Errorf("with secrets.bundle: %v", err)
	}

	c.Secrets = nil
	if got := inv.Adoptees(c); len(got) != 0 {
		t.Errorf("without secrets.bundle: %v", got)
	}

	// w-3's VM was adopted: dropping secrets.bundle would give the cluster new secrets.
	if err := inv.AdoptedWithoutBundle(c); err == nil || !strings.Contains(err.Error(),
		"secrets.bundle: this cluster was adopted with its secrets bundle (VM 7005 of w-3 is tagged talos-adopted); keep secrets.bundle") {
		t.Errorf("an adopted cluster without secrets.bundle: %v", err)
	}
}

// TestVMDifferences: an adopted VM's configuration against its declaration: what changes in
// place, said with its effect, and what would lose data, refused with the property to fix.
func TestVMDifferences(t *testing.T) {
	t.Parallel()

	node := spec.Node{Name: "w-1", CPU: 2, MemoryMiB: 4096, Bridge: "vmbr0"}
	p := plan.VM{Node: node, Disks: []plan.Disk{
		{Interface: "scsi0", DatastoreID: "local-lvm", SizeGiB: 20},
		{Interface: "scsi1", DatastoreID: "local-lvm", SizeGiB: 100},
	}}

	same := map[string]string{
		"name": "w-1", "cores": "2", "memory": "4096", "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
		"scsi0": "local-lvm:vm-7003-disk-0,discard=on,size=20G", "scsi1": "local-lvm:vm-7003-disk-1,size=102400M",
		"ide2": "local-lvm:vm-7003-cloudinit,media=cdrom", "ide3": "none,media=cdrom",
	}
	if changes, refused := VMDifferences(p, same); len(changes) != 0 || len(refused) != 0 {
		t.Errorf("a VM as declared: changes %v, refused %v", changes, refused)
	}

	differs := map[string]string{
		"name": "talos-w-01", "cores": "4", "memory": "2048", "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr1,tag=20",
		"scsi0": "local-lvm:vm-7003-disk-0,size=10G", "scsi1": "fast:vm-7003-disk-1,size=200G", "scsi2": "local-lvm:vm-7003-disk-2,size=5G",
		"net1": "virtio=BC:24:11:00:00:02,bridge=vmbr9", "hostpci0": "0000:01:00,pcie=1",
	}
	changes, refused := VMDifferences(p, differs)

	wantChanges := []string{
		`name "talos-w-01" → "w-1" (in place)`,
		"cpu 4 → 2 cores (in place; the VM is rebooted by the proxmoxve provider to apply it)",
		"memory 2048 → 4096 MiB (in place; the VM is rebooted by the proxmoxve provider to apply it)",
		"disk scsi0 10 → 20 GiB (grown in place)",
		"bridge vmbr1 → vmbr0 (in place)",
		"vlan 20 → 0 (in place)",
	}
	if strings.Join(changes, "\n") != strings.Join(wantChanges, "\n") {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(changes, "\n"), strings.Join(wantChanges, "\n"))
	}

	if len(refused) != 4 ||
		!strings.Contains(refused[0].Error(), "nodes.w-1.dataDisks[0].sizeGib: VM talos-w-01's disk scsi1 has 200 GiB; 100 GiB would shrink it") ||
		!strings.Contains(refused[1].Error(), "nodes.w-1: VM talos-w-01 has disk scsi2 (local-lvm:vm-7003-disk-2,size=5G) that the node does not declare") ||
		!strings.Contains(refused[2].Error(), "nodes.w-1: VM talos-w-01 has the PCI device hostpci0 (0000:01:00,pcie=1), which the node does not declare") ||
		!strings.Contains(refused[3].Error(), "nodes.w-1: VM talos-w-01 has network device net1 (virtio=BC:24:11:00:00:02,bridge=vmbr9), which the node does not declare") {
		t.Errorf("refused: %v", refused)
	}
}

// TestVMDifferencesOfNetworks: an adopted VM's second NIC is compared with the node's second
// network, and its MAC, which the node's configuration selects it by, must be declared.
func TestVMDifferencesOfNetworks(t *testing.T) {
	t.Parallel()

	node := spec.Node{Name: "w-1", Bridge: "vmbr0", NICs: []spec.NIC{
		{Bridge: "vmbr0"}, {Bridge: "vmbr1", MTU: 9000, MACAddress: spec.DeriveMAC("home", "w-1", "vmbr1/0", 1)},
	}}
	vm := map[string]string{"name": "w-1", "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "net1": "virtio=BC:24:11:00:00:02,bridge=vmbr1"}

	changes, refused := VMDifferences(plan.VM{Node: node}, vm)
	if !slices.Contains(changes, "net1: mtu 0 → 9000 (in place)") {
		t.Errorf("changes %v, want net1's MTU", changes)
	}

	if len(refused) != 1 || !strings.Contains(refused[0].Error(), `macAddress: "BC:24:11:00:00:02"`) {
		t.Errorf("refused %v, want the NIC's MAC to be declared", refused)
	}
}

func TestSizeGiB(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]int{"20G": 20, "102400M": 100, "1T": 1024, "": 0, "21474836480": 20, "x": 0} {
		if got := sizeGiB(in); got != want {
			t.Errorf("sizeGiB(%q) = %d, want %d", in, got, want)
		}
	}
}

// secrets.bundle of a running cluster, made by the component or adopted, is checked against one of
// its control planes; a new cluster or an unknown bundle is not.
func TestBundleCheckNode(t *testing.T) {
	t.Parallel()

	c := &spec.Cluster{Name: "home", Secrets: &spec.Secrets{Known: true}, Nodes: []spec.Node{
		{Name: "cp-1", HostNode: "pve1", Role: spec.RoleControlPlane, IP: "10.0.0.11"},
		{Name: "w-1", HostNode: "pve1", Role: spec.RoleWorker, IP: "10.0.0.21"},
	}}
	own := &Inventory{Nodes: []string{"pve1"}, VMs: []vm.GetVirtualMachinesVm{
		{Name: "cp-1", NodeName: "pve1", VmId: 7001, Tags: []string{"home", "talos", "talos-i-00aa11bb"}},
	}}

	if n, ok := own.BundleCheckNode(c); !ok || n.Name != "cp-1" {
		t.Errorf("a running cluster the component made: %v %v", n.Name, ok)
	}

	adopted := &Inventory{Nodes: []string{"pve1"}, VMs: []vm.GetVirtualMachinesVm{
		{Name: "cp-1", NodeName: "pve1", VmId: 7001, Tags: []string{"home", "talos", "talos-i-00aa11bb", AdoptedTag}},
	}}
	if n, ok := adopted.BundleCheckNode(c); !ok || n.Name != "cp-1" {
		t.Errorf("an adopted cluster: %v %v", n.Name, ok)
	}

	if _, ok := (&Inventory{Nodes: []string{"pve1"}}).BundleCheckNode(c); ok {
		t.Error("a new cluster: checked")
	}

	c.Secrets.Known = false
	if _, ok := own.BundleCheckNode(c); ok {
		t.Error("an unknown bundle: checked")
	}
}
