package proxmox

import (
	"strings"
	"testing"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

func vmIDCluster(names ...string) *spec.Cluster {
	c := &spec.Cluster{Name: "homelab", VMIDs: spec.VMIDRange{Start: 800000, End: 899999}}
	for _, n := range names {
		c.Nodes = append(c.Nodes, spec.Node{Name: n, HostNode: "pve1"})
	}

	return c
}

func TestAssignVMIDsIsStableAndAvoidsTakenIDs(t *testing.T) {
	c := vmIDCluster("cp-1", "cp-2", "worker-1")
	inv := &Inventory{Nodes: []string{"pve1"}}

	first, warnings, err := AssignVMIDs(c, inv)
	if err != nil || len(warnings) > 0 {
		t.Fatal(err, warnings)
	}

	seen := map[int]bool{}
	for _, n := range c.Nodes {
		id := first[n.Name]
		if id < 800000 || id > 899999 || seen[id] {
			t.Fatalf("node %s got id %d (all: %v)", n.Name, id, first)
		}
		seen[id] = true

		if id != hashedVMID(c.VMIDs, "homelab", n.Name) {
			t.Errorf("node %s: %d is not its hash %d although nothing is taken", n.Name, id, hashedVMID(c.VMIDs, "homelab", n.Name))
		}
	}

	again, _, _ := AssignVMIDs(c, inv)
	for name, id := range first {
		if again[name] != id {
			t.Errorf("node %s: %d, then %d", name, id, again[name])
		}
	}

	// Someone else's VM at cp-2's id: cp-2 moves up by one; the others stay.
	inv.VMs = []vm.GetVirtualMachinesVm{{VmId: first["cp-2"], Name: "db", NodeName: "pve1"}}

	moved, _, _ := AssignVMIDs(c, inv)
	want := first["cp-2"] + 1
	if want > 899999 {
		want = 800000
	}

	if moved["cp-2"] != want {
		t.Errorf("cp-2 got %d, want %d", moved["cp-2"], want)
	}

	if moved["cp-1"] != first["cp-1"] || moved["worker-1"] != first["worker-1"] {
		t.Errorf("other nodes moved: %v → %v", first, moved)
	}
}

func TestAssignVMIDsKeepsExistingVMsIDs(t *testing.T) {
	c := vmIDCluster("cp-1", "worker-1")
	tags := []string{"controlplane", "homelab", "talos"}
	inv := &Inventory{Nodes: []string{"pve1"}, VMs: []vm.GetVirtualMachinesVm{
		{VmId: 105, Name: "cp-1", NodeName: "pve1", Tags: tags},
		// Same name, another cluster's: not cp-1's, and its id is taken.
		{VmId: 106, Name: "worker-1", NodeName: "pve1", Tags: []string{"other", "talos", "worker"}},
	}}

	ids, _, err := AssignVMIDs(c, inv)
	if err != nil {
		t.Fatal(err)
	}

	if ids["cp-1"] != 105 {
		t.Errorf("cp-1's VM exists with id 105; assigned %d", ids["cp-1"])
	}

	if ids["worker-1"] == 106 || ids["worker-1"] < 800000 {
		t.Errorf("worker-1 got %d", ids["worker-1"])
	}

	// Two VMs of cp-1: ambiguous, so Proxmox keeps choosing and a warning names both.
	inv.VMs = append(inv.VMs, vm.GetVirtualMachinesVm{VmId: 107, Name: "cp-1", NodeName: "pve1", Tags: tags})

	ids, warnings, _ := AssignVMIDs(c, inv)
	if _, ok := ids["cp-1"]; ok || len(warnings) != 1 || !strings.Contains(warnings[0], "105 on pve1, 107 on pve1") {
		t.Errorf("ids %v, warnings %v", ids, warnings)
	}
}

func TestAssignVMIDsNeedsAnInventoryAndRoom(t *testing.T) {
	c := vmIDCluster("cp-1", "cp-2")

	if ids, _, _ := AssignVMIDs(c, nil); ids != nil {
		t.Errorf("without an inventory Proxmox must choose; assigned %v", ids)
	}

	if ids, _, _ := AssignVMIDs(c, &Inventory{}); ids != nil {
		t.Errorf("with an empty inventory (unknown configuration at preview) Proxmox must choose; assigned %v", ids)
	}

	c.VMIDs = spec.VMIDRange{Start: 900, End: 901}
	inv := &Inventory{Nodes: []string{"pve1"}, VMs: []vm.GetVirtualMachinesVm{{VmId: 900, Name: "x"}}}

	if _, _, err := AssignVMIDs(c, inv); err == nil || !strings.Contains(err.Error(), "vmIdRange: every id from 900 to 901 is taken") {
		t.Errorf("a full range: %v", err)
	}

	// A pinned id is never given to another node.
	c.VMIDs = spec.VMIDRange{Start: 900, End: 901}
	c.Nodes[0].VMID = 901
	inv.VMs = nil

	ids, _, err := AssignVMIDs(c, inv)
	if err != nil || ids["cp-2"] != 900 {
		t.Errorf("cp-2 got %v (%v); 901 is cp-1's", ids, err)
	}
}

func TestNamesCreateTask(t *testing.T) {
	bpg := `error waiting for VM create: error while waiting for task "UPID:pve1:00000010:01C7D030:6745F0A1:qmcreate:812345:root@pam!lab:" to complete: HTTP 500`
	if !namesCreateTask([]string{"x", bpg}, 812345) {
		t.Error("bpg's create task failure not recognised")
	}

	for _, other := range []string{
		`error while waiting for task "UPID:pve1:1:2:3:qmstart:812345:root@pam:"`, // a start: the VM is in the state
		`error while waiting for task "UPID:pve1:1:2:3:qmcreate:8123456:root@pam:"`,
		"unable to create VM 812345 - VM 812345 already exists on node 'pve1'",
	} {
		if namesCreateTask([]string{other}, 812345) {
			t.Errorf("%q taken for the create task of 812345", other)
		}
	}
}
