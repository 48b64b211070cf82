//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// TestYAMLLifecycleOnTheLab changes a running cluster the way its owner would: add a worker,
// remove it, move a node to another Proxmox host (its VM is replaced and the new VM gets its
// Talos configuration again), and change one node's patch (only that node is re-configured).
// The bootstrap is never repeated: the emulated control plane refuses a second one.
func TestYAMLLifecycleOnTheLab(t *testing.T) {
	t.Parallel()

	e := newEnv(t)

	program, err := os.ReadFile("../../examples/yaml/Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}

	write := func(text string) {
		t.Helper()

		if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	base := string(program)
	write(base)

	l, p := onLab(t, e, lab.Options{Subnet: 9}, nil)
	up := func(what string) string {
		t.Helper()

		out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
		if err != nil {
			t.Fatalf("up (%s): %v\n%s", what, err, out)
		}

		return out
	}

	up("create")

	// Add a worker.
	worker3 := "        worker-3:\n          hostNode: ${hosts[1]}\n          role: worker\n          ip: " + l.Address(23) + "\n"
	withWorker := strings.Replace(base, "        gpu-1:\n", worker3+"        gpu-1:\n", 1)
	write(withWorker)
	up("add worker-3")

	if n := len(l.PVE.VMs()); n != 6 {
		t.Errorf("after adding a worker the fake has %d VMs, want 6", n)
	}

	if node := nodeAt(l.Controller.Nodes(), l.Address(23)); node == nil || node.State() == talosemu.StateMaintenance {
		t.Errorf("worker-3 did not get its configuration")
	}

	// Remove it again.
	write(base)
	up("remove worker-3")

	if n := len(l.PVE.VMs()); n != 5 {
		t.Errorf("after removing the worker the fake has %d VMs, want 5", n)
	}

	// Move storage-1 to the other host: a new VM, which must be configured again.
	before := vmOf(l, "storage-1")
	moved := strings.Replace(base, "        storage-1:\n          hostNode: ${hosts[0]}", "        storage-1:\n          hostNode: ${hosts[1]}", 1)
	write(moved)
	out := up("move storage-1")

	// Proxmox hands out the lowest free id, so the new VM may get the old one's id back: a new
	// VM is told by its generation id (vmgenid), which every create draws afresh.
	after := vmOf(l, "storage-1")
	if after.Node != "pve2" || after.Config["vmgenid"] == "" || after.Config["vmgenid"] == before.Config["vmgenid"] {
		t.Errorf("storage-1 was not re-created on pve2: before %s %d vmgenid %s, after %s %d vmgenid %s",
			before.Node, before.VMID, before.Config["vmgenid"], after.Node, after.VMID, after.Config["vmgenid"])
	}

	if !regexp.MustCompile(`homelab-storage-1-config replaced`).MatchString(out) {
		t.Errorf("the configuration of the replaced VM was not re-applied:\n%s", out)
	}

	if node := nodeAt(l.Controller.Nodes(), l.Address(21)); node == nil || node.State() == talosemu.StateMaintenance {
		t.Errorf("the new storage-1 VM is left in maintenance mode")
	}

	// Change gpu-1's own patch: only gpu-1 is re-configured.
	patched := strings.Replace(moved, "          pciDevices:\n            - mapping: gpu\n",
		"          pciDevices:\n            - mapping: gpu\n          configPatches:\n            - |\n              machine:\n                sysctls:\n                  vm.nr_hugepages: \"1024\"\n", 1)
	write(patched)
	out = up("patch gpu-1")

	// The running node takes it through its NodeConfig (the ConfigurationApply configured the new VM).
	updated := regexp.MustCompile(`(homelab-[a-z0-9-]+-config) updated`).FindAllStringSubmatch(out, -1)
	if len(updated) != 1 || updated[0][1] != "homelab-gpu-1-node-config" {
		t.Errorf("changing gpu-1's patch updated %v, want only homelab-gpu-1-node-config:\n%s", updated, out)
	}

	if !strings.Contains(out, "gpu-1: configuration applied live, without a reboot") {
		t.Errorf("the up does not say how gpu-1's configuration was applied:\n%s", out)
	}

	if out, err := p.Run(t.Context(), "preview", "--expect-no-changes"); err != nil {
		t.Errorf("preview at the end shows changes: %v\n%s", err, out)
	}

	if out, err := p.Run(t.Context(), "destroy", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
}

func nodeAt(nodes map[int]*talosemu.Node, ip string) *talosemu.Node {
	for _, n := range nodes {
		if n.IP() == ip {
			return n
		}
	}

	return nil
}

// vmOf is the fake's VM of a node (the component names VMs after their node).
func vmOf(l *lab.Lab, name string) pvefake.VM {
	for _, vm := range l.PVE.VMs() {
		if vm.Name == name {
			return vm
		}
	}

	return pvefake.VM{}
}
