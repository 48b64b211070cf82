//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// TestTalosVersionChangeKeepsVMs pins what changing talosVersion does to the Proxmox side, as
// docs/operations.md says: the image downloads are replaced (delete first), every node's
// configuration is re-applied with the new installer image, and no VM is re-created or even
// updated (the nodes are upgraded in place: lab_upgrade_test.go; a VM's description names no
// Talos version, which would be wrong on the nodes a failed rollout did not reach).
func TestTalosVersionChangeKeepsVMs(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	l, p := onSmallCluster(t, e, "upgrade", lab.Options{Subnet: 15})
	ctx := t.Context()

	mustRun(t, p, "up", "--yes", "--skip-preview")

	before := map[string]int{}
	for _, vm := range l.PVE.VMs() {
		before[vm.Name] = vm.VMID
	}

	program := filepath.Join(e.dir, "Pulumi.yaml")
	text, err := os.ReadFile(program)
	if err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(program, []byte(strings.Replace(string(text), "talosVersion: v1.11.5", "talosVersion: v1.11.6", 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	preview := mustRun(t, p, "preview", "--diff")
	for _, want := range []string{
		"proxmoxve:Download/file:File: (replace)", "talos-proxmox:lifecycle:NodeConfig: (update)",
		"talos-proxmox:lifecycle:NodeUpgrade: (update)",
	} {
		if !strings.Contains(preview, want) {
			t.Errorf("the preview does not show %q:\n%s", want, preview)
		}
	}

	if strings.Contains(preview, "VirtualMachine: (replace)") || strings.Contains(preview, "VirtualMachine: (update)") {
		t.Errorf("the preview replaces or updates a VM:\n%s", preview)
	}

	l.PVE.ResetCalls()

	out, err := p.Run(ctx, "up", "--yes", "--skip-preview")
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}

	// VM ids are handed out by Proxmox here, so a re-created VM may get its old id back: count
	// the creates and deletes instead.
	if n := l.PVE.CallCount("POST /nodes/{node}/qemu") + l.PVE.CallCount("DELETE /nodes/{node}/qemu/{vmid}"); n != 0 {
		t.Errorf("%d VM creates/deletes during the version change; running VMs must be kept", n)
	}

	if n := l.PVE.CallCount("PUT /nodes/{node}/qemu/{vmid}/config") + l.PVE.CallCount("POST /nodes/{node}/qemu/{vmid}/config"); n != 0 {
		t.Errorf("%d VM configuration writes during the version change; running VMs must not be touched", n)
	}

	after := map[string]int{}
	for _, vm := range l.PVE.VMs() {
		after[vm.Name] = vm.VMID
	}

	if len(after) != len(before) {
		t.Fatalf("VMs before %v, after %v", before, after)
	}

	for name, id := range before {
		if after[name] != id {
			t.Errorf("VM %s was re-created (id %d → %d); a Talos version change must keep running VMs", name, id, after[name])
		}
	}

	t.Logf("preview of the version change:\n%s\nup:\n%s", preview, out)
}
