//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// TestTalosVersionChangeKeepsVMs pins what changing talosVersion does to the Proxmox side, as
// docs/operations.md says: the image downloads are replaced (delete first), every node's
// configuration is re-applied with the new installer image, and no VM is re-created or even
// updated (the nodes are upgraded in place: lab_upgrade_test.go; a VM's description names no
// Talos version, which would be wrong on the nodes a failed rollout did not reach). Then an
// extensions-only change (image.extensions gains siderolabs/iscsi-tools): the schematic, so the
// installer image, changes; the nodes are upgraded in place to it, one at a time, on the same
// Talos version, and again no VM is re-created or updated.
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

	t.Run("extensions", func(t *testing.T) { extensionsChange(t, e, l, p, after) })
}

// extensionsChange adds siderolabs/iscsi-tools to image.extensions of smallCluster's program on
// v1.11.6: the preview replaces the downloads and updates each NodeUpgrade to the installer of
// the new schematic (the Image Factory's own id of the new extension list), and no VM; the up
// reboots each node once, control plane first, into that schematic on the same version, creates,
// deletes and reconfigures no VM; the preview after shows nothing.
func extensionsChange(t *testing.T, e *env, l *lab.Lab, p *lab.Pulumi, vms map[string]int) {
	t.Helper()

	var s schematic.Schematic
	s.Customization.SystemExtensions.OfficialExtensions = []string{"siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools"}

	want, err := s.ID()
	if err != nil {
		t.Fatal(err)
	}

	before := map[string]talosemu.Installed{}
	for name, n := range labNodes(t, l) {
		before[name] = n.Running()
		if before[name].Schematic == want || before[name].Version != "v1.11.6" {
			t.Fatalf("%s runs %+v before the change; want v1.11.6 on another schematic than %s", name, before[name], want)
		}
	}

	editProgram(t, e, "        factoryUrl: ${factoryUrl}\n",
		"        factoryUrl: ${factoryUrl}\n        extensions: [siderolabs/qemu-guest-agent, siderolabs/iscsi-tools]\n")

	preview := mustRun(t, p, "preview", "--diff")
	for _, want := range []string{"proxmoxve:Download/file:File: (replace)", "talos-proxmox:lifecycle:NodeUpgrade: (update)", want + ":v1.11.6"} {
		if !strings.Contains(preview, want) {
			t.Errorf("the preview does not show %q:\n%s", want, preview)
		}
	}

	// Each node's configuration diff names the installer image and says the node reboots.
	for _, node := range []string{"cp-1", "worker-1"} {
		line := regexp.MustCompile(node + `: configuration changes: v1alpha1: \.machine\.install\.image: \S+ → \S+` + want + `:v1\.11\.6; reboots: the installer image changes to `)
		if !line.MatchString(preview) {
			t.Errorf("the preview does not say %s:\n%s", line, preview)
		}
	}

	if strings.Contains(preview, "VirtualMachine: (replace)") || strings.Contains(preview, "VirtualMachine: (update)") {
		t.Errorf("the preview replaces or updates a VM:\n%s", preview)
	}

	if got := previewUpdates(t, p, nodeUpgradeType); !slices.Equal(got, []string{"update upgrade-cp-1-upgrade", "update upgrade-worker-1-upgrade"}) {
		t.Errorf("the preview shows node upgrades %v, want both nodes'", got)
	}

	boots := bootIDs(t, l)

	l.PVE.ResetCalls()
	start := time.Now()
	out := mustRun(t, p, "up", "--yes", "--skip-preview")
	r := eventsSince(l, t, start)

	r.check(t, []string{"cp-1", "worker-1"}, true, 1)

	for name, n := range labNodes(t, l) {
		if got := n.Running(); got != (talosemu.Installed{Version: "v1.11.6", Schematic: want}) {
			t.Errorf("%s runs %+v after the extensions change, want v1.11.6 on schematic %s", name, got, want)
		}

		if n.BootID() == boots[name] {
			t.Errorf("%s did not reboot into the new schematic", name)
		}
	}

	if !slices.Contains(l.Factory.Schematics(), want) {
		t.Errorf("the new schematic %s was not registered with the Image Factory: %v", want, l.Factory.Schematics())
	}

	keptVMs(t, l, vms)
	mustRun(t, p, "preview", "--expect-no-changes")

	t.Logf("extensions change: events:\n%s\nup:\n%s", r, out)
}
