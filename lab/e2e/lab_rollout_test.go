//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// rollout is what the event log says about one `up`: every node's reboots, in order.
type rollout struct {
	events []talosemu.Event
}

func eventsSince(l *lab.Lab, t testing.TB, since time.Time) rollout {
	t.Helper()

	var r rollout

	for _, n := range labNodes(t, l) {
		for _, ev := range n.Cluster().Events() {
			if ev.Time.After(since) {
				r.events = append(r.events, ev)
			}
		}

		break // one cluster: every node shares its log
	}

	return r
}

func (r rollout) String() string {
	lines := make([]string, len(r.events))
	for i, ev := range r.events {
		lines[i] = ev.Time.Format("15:04:05.000") + " " + ev.String()
	}

	return strings.Join(lines, "\n")
}

// downs lists the nodes that went down, in order.
func (r rollout) downs() []string {
	var out []string

	for _, ev := range r.events {
		if ev.Kind == "down" {
			out = append(out, ev.Node)
		}
	}

	return out
}

// maxDown is the most nodes down at once, and whether a control plane was down together with
// another node.
func (r rollout) maxDown() (most int, cpOverlap bool) {
	return r.most("boot")
}

// maxInTurn is the most nodes at once between going down and their Node's first Ready of the
// next boot (a rollout waits for that before the next node of the same lane goes down), and
// whether a control plane was one of several such nodes.
func (r rollout) maxInTurn() (most int, cpOverlap bool) {
	return r.most("ready")
}

// most counts the nodes between a "down" event and their next event of kind end.
func (r rollout) most(end string) (most int, cpOverlap bool) {
	open := map[string]bool{}

	for _, ev := range r.events {
		switch ev.Kind {
		case "down":
			open[ev.Node] = true
		case end:
			delete(open, ev.Node)
		}

		most = max(most, len(open))

		if len(open) > 1 {
			for n := range open {
				cpOverlap = cpOverlap || strings.HasPrefix(n, "cp-")
			}
		}
	}

	return most, cpOverlap
}

// lostQuorum returns the first etcd event with no quorum of running members.
func (r rollout) lostQuorum() (talosemu.Event, bool) {
	for _, ev := range r.events {
		if ev.Kind == "etcd" && ev.Running*2 <= ev.Members {
			return ev, true
		}
	}

	return talosemu.Event{}, false
}

// check checks a rollout of every node of order (control planes first, then workers by name)
// with upgrade.maxParallel: each node went down once, the control planes first (in the order of
// order when cpsInOrder), one at a time, and the workers after them; no node went down before the
// one it waits for had its Node Ready again, i.e. at most maxParallel nodes were between going
// down and Ready at once, and a control plane only alone; with maxParallel > 1, more than one
// worker was down at once; etcd kept its quorum (with more than one control plane).
func (r rollout) check(t *testing.T, order []string, cpsInOrder bool, maxParallel int) {
	t.Helper()

	downs := r.downs()
	cps := slices.DeleteFunc(slices.Clone(order), func(n string) bool { return !strings.HasPrefix(n, "cp-") })

	switch {
	case len(downs) != len(order):
		t.Errorf("nodes went down in the order %v, want each of %v once", downs, order)
	case maxParallel == 1 && cpsInOrder:
		if !slices.Equal(downs, order) {
			t.Errorf("nodes went down in the order %v, want each once, control planes first: %v", downs, order)
		}
	default:
		gotCPs, gotWorkers := slices.Clone(downs[:len(cps)]), slices.Clone(downs[len(cps):])
		wantCPs, wantWorkers := slices.Clone(cps), slices.Clone(order[len(cps):])

		if !cpsInOrder {
			slices.Sort(gotCPs)
			slices.Sort(wantCPs)
		}

		if maxParallel > 1 {
			slices.Sort(gotWorkers)
		}

		if !slices.Equal(gotCPs, wantCPs) || !slices.Equal(gotWorkers, wantWorkers) {
			t.Errorf("nodes went down in the order %v, want each of %v once, the control planes first", downs, order)
		}
	}

	if most, cpOverlap := r.maxDown(); most > maxParallel || cpOverlap || maxParallel > 1 && most < 2 {
		t.Errorf("at most %d nodes were down at once (a control plane among several: %v); with upgrade.maxParallel %d "+
			"the workers go %d at a time and each control plane alone", most, cpOverlap, maxParallel, maxParallel)
	}

	if most, cpOverlap := r.maxInTurn(); most > maxParallel || cpOverlap {
		t.Errorf("%d nodes were between going down and their Node Ready again at once (a control plane among several: %v): "+
			"a node went down before the one it waits for was back; upgrade.maxParallel is %d", most, cpOverlap, maxParallel)
	}

	// A single control plane's etcd stops with every reboot of it.
	if ev, lost := r.lostQuorum(); lost && len(cps) > 1 {
		t.Errorf("etcd lost its quorum at %s", ev)
	}
}

// rebootingConfigChange changes every node's configuration in a way Talos cannot apply live
// (machine.env: Talos' immediate-apply rule, which the lab's nodes follow, leaves it to a reboot):
// the preview warns for each node that its change needs a reboot; the up applies it in Talos'
// AUTO mode through each node's NodeConfig and reboots each node once, control planes one at a
// time and then the workers maxParallel at a time, each waited for (its new boot, its Node Ready)
// before the next node of its lane goes down; no VM is touched, the nodes run the new
// configuration and the preview after shows nothing.
func rebootingConfigChange(t *testing.T, e *env, l *lab.Lab, p *lab.Pulumi, vms map[string]int, maxParallel int) {
	t.Helper()

	editProgram(t, e, "      kubernetesVersion: v1.33.5\n",
		"      kubernetesVersion: v1.33.5\n      configPatches:\n        - |\n          machine:\n            env:\n              GRPC_GO_LOG_SEVERITY_LEVEL: error\n")

	preview := mustRun(t, p, "preview")
	for name := range labNodes(t, l) {
		if !strings.Contains(preview, name+": configuration changes: v1alpha1: .machine.env: (none) → {GRPC_GO_LOG_SEVERITY_LEVEL: error}; reboots: Talos v1.11.6 applies a change of .machine.env only with a reboot") {
			t.Errorf("the preview does not warn that %s needs a reboot:\n%s", name, preview)
		}
	}

	boots := bootIDs(t, l)
	order, _ := rolloutOrder(t, p, l)

	l.PVE.ResetCalls()
	start := time.Now()
	out := mustRun(t, p, "up", "--yes", "--skip-preview")
	took := time.Since(start)
	r := eventsSince(l, t, start)

	r.check(t, order, false, maxParallel)

	for name, n := range labNodes(t, l) {
		if n.BootID() == boots[name] {
			t.Errorf("%s did not reboot for a configuration Talos cannot apply live", name)
		}

		if !strings.Contains(out, name+": configuration applied with a reboot") {
			t.Errorf("the up does not say that %s's configuration was applied with a reboot:\n%s", name, out)
		}

		cfg, err := configloader.NewFromBytes(n.Config())
		if err != nil {
			t.Fatalf("%s's running configuration: %v", name, err)
		}

		if env := cfg.Machine().Env(); env["GRPC_GO_LOG_SEVERITY_LEVEL"] != "error" {
			t.Errorf("%s runs machine.env %v, want the new GRPC_GO_LOG_SEVERITY_LEVEL", name, env)
		}
	}

	keptVMs(t, l, vms)
	mustRun(t, p, "preview", "--expect-no-changes")

	t.Logf("a configuration change with reboots (upgrade.maxParallel %d) took %s; events:\n%s\nup:\n%s",
		maxParallel, took.Round(time.Millisecond), r, out)
}

// vmIDs are the lab's VM ids by VM name.
func vmIDs(l *lab.Lab) map[string]int {
	ids := map[string]int{}
	for _, vm := range l.PVE.VMs() {
		ids[vm.Name] = vm.VMID
	}

	return ids
}

// bootIDs are the lab's nodes' boot ids by hostname.
func bootIDs(t testing.TB, l *lab.Lab) map[string]string {
	t.Helper()

	boots := map[string]string{}
	for name, n := range labNodes(t, l) {
		boots[name] = n.BootID()
	}

	return boots
}

// keptVMs fails the test when Proxmox saw a VM created, deleted or reconfigured since the last
// ResetCalls, or a VM's id differs from vms.
func keptVMs(t *testing.T, l *lab.Lab, vms map[string]int) {
	t.Helper()

	if c := l.PVE.CallCount("POST /nodes/{node}/qemu") + l.PVE.CallCount("DELETE /nodes/{node}/qemu/{vmid}"); c != 0 {
		t.Errorf("%d VM creates/deletes; running VMs must be kept", c)
	}

	if c := l.PVE.CallCount("PUT /nodes/{node}/qemu/{vmid}/config") + l.PVE.CallCount("POST /nodes/{node}/qemu/{vmid}/config"); c != 0 {
		t.Errorf("%d VM configuration writes; running VMs must not be touched", c)
	}

	if now := vmIDs(l); fmt.Sprint(now) != fmt.Sprint(vms) {
		t.Errorf("VMs (name: id) were %v, now %v", vms, now)
	}
}
