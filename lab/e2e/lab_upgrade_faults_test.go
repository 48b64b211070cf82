//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// TestUpgradeStopsAtANodeThatRollsBack: the second control plane in rollout order (leader last)
// gets a new image that does not boot (Talos falls back to the old one). The up fails naming it
// and what it runs; the nodes after it are not touched. Once the fault is gone, the preview lists
// only the nodes still to do (the first is finished) and the next up finishes without rebooting
// the first again.
func TestUpgradeStopsAtANodeThatRollsBack(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 17}, func(l *lab.Lab) string { return haCluster(l, "rollback", "v1.11.5") })

	mustRun(t, p, "up", "--yes", "--skip-preview")

	order, _ := rolloutOrder(t, p, l)
	first, bad := order[0], order[1]

	labNodes(t, l)[bad].SetFaults(talosemu.Faults{RollbackUpgrade: true})
	setTalosVersion(t, e, "v1.11.5", "v1.11.6")

	start := time.Now()

	out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err == nil {
		t.Fatalf("the up succeeded although cp-2 rolled back:\n%s", out)
	}

	for _, want := range []string{"node " + bad + " rebooted but runs v1.11.5", "not v1.11.6"} {
		if !strings.Contains(out, want) {
			t.Errorf("the error does not say %q:\n%s", want, out)
		}
	}

	if downs := eventsSince(l, t, start).downs(); !slices.Equal(downs, order[:2]) {
		t.Errorf("nodes that went down: %v, want %v and nothing after the failure", downs, order[:2])
	}

	running := map[string]string{}
	for name, n := range labNodes(t, l) {
		running[name] = n.Running().Version
	}

	for _, name := range order {
		v := "v1.11.5"
		if name == first {
			v = "v1.11.6"
		}

		if running[name] != v {
			t.Errorf("%s runs %s, want %s", name, running[name], v)
		}
	}

	labNodes(t, l)[bad].SetFaults(talosemu.Faults{})

	var wantUpdates []string
	for _, name := range order[1:] {
		wantUpdates = append(wantUpdates, "update rollback-"+name+"-upgrade")
	}

	slices.Sort(wantUpdates)

	if got := previewUpdates(t, p, nodeUpgradeType); !slices.Equal(got, wantUpdates) {
		t.Errorf("the preview after the failure shows %v, want %v (%s is done)", got, wantUpdates, first)
	}

	start = time.Now()
	mustRun(t, p, "up", "--yes", "--skip-preview")

	if downs := eventsSince(l, t, start).downs(); !slices.Equal(downs, order[1:]) {
		t.Errorf("nodes that went down in the second up: %v, want the four that were left: %v", downs, order[1:])
	}

	for name, n := range labNodes(t, l) {
		if v := n.Running().Version; v != "v1.11.6" {
			t.Errorf("%s runs %s after the second up", name, v)
		}
	}

	mustRun(t, p, "preview", "--expect-no-changes")
}

// TestInterruptedUpgradeResumes kills `pulumi up` (the CLI and its plugins) while the rollout is
// under way; the next up finishes it and reboots no node a second time.
func TestInterruptedUpgradeResumes(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 18}, func(l *lab.Lab) string { return haCluster(l, "resume", "v1.11.5") })

	mustRun(t, p, "up", "--yes", "--skip-preview")
	setTalosVersion(t, e, "v1.11.5", "v1.11.6")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan string, 1)
	start := time.Now()

	go func() {
		out, _ := p.Run(ctx, "up", "--yes", "--skip-preview")
		done <- out
	}()

	// Kill the up once cp-2 has come back on the new version.
	deadline := time.Now().Add(2 * time.Minute)

	for !slices.ContainsFunc(eventsSince(l, t, start).events, func(ev talosemu.Event) bool {
		return ev.Kind == "boot" && ev.Node == "cp-2" && ev.Version == "v1.11.6"
	}) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("cp-2 was not upgraded within 2 minutes:\n%s", <-done)
		}

		time.Sleep(20 * time.Millisecond)
	}

	cancel()
	out := <-done
	killed := time.Now()

	// The provider plugin may outlive the CLI a moment; let what it does settle.
	time.Sleep(3 * time.Second)

	first := eventsSince(l, t, start).downs()
	t.Logf("killed after %v; nodes down by then: %v\n%s", killed.Sub(start).Round(time.Millisecond), first, out)

	upgraded := map[string]bool{}
	for name, n := range labNodes(t, l) {
		upgraded[name] = n.Running().Version == "v1.11.6"
	}

	// The documented recovery (docs/operations.md, "An interrupted up"): release the lock, up.
	mustRun(t, p, "cancel", "--yes")

	again := time.Now()
	mustRun(t, p, "up", "--yes", "--skip-preview")

	for _, name := range eventsSince(l, t, again).downs() {
		if upgraded[name] {
			t.Errorf("%s ran v1.11.6 before the second up and was rebooted again", name)
		}
	}

	for name, n := range labNodes(t, l) {
		if v := n.Running().Version; v != "v1.11.6" {
			t.Errorf("%s runs %s after the second up", name, v)
		}
	}

	mustRun(t, p, "preview", "--expect-no-changes")
}
