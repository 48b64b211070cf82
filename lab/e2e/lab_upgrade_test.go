//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// haCluster is 3 control planes (one per host) and 2 workers, with the Kubernetes version
// pinned so a Talos minor change does not change it.
func haCluster(l *lab.Lab, name, version string) string {
	return fmt.Sprintf(`name: %[1]s
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  %[1]s:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: %[1]s
      talosVersion: %[2]s
      kubernetesVersion: v1.33.5
      vip: %[3]s
      network:
        gateway: %[4]s
      image:
        factoryUrl: ${factoryUrl}
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[5]s}
        cp-2: {hostNode: pve2, role: controlplane, ip: %[6]s}
        cp-3: {hostNode: pve3, role: controlplane, ip: %[7]s}
        worker-1: {hostNode: pve1, role: worker, ip: %[8]s}
        worker-2: {hostNode: pve2, role: worker, ip: %[9]s}
outputs:
  endpoint: ${%[1]s.endpoint}
  kubeconfig: ${%[1]s.kubeconfig}
  talosconfig: ${%[1]s.talosconfig}
`, name, version, l.Address(10), l.Address(1), l.Address(11), l.Address(12), l.Address(13), l.Address(21), l.Address(22))
}

// setTalosVersion rewrites the program's talosVersion.
func setTalosVersion(t *testing.T, e *env, from, to string) {
	t.Helper()

	program := filepath.Join(e.dir, "Pulumi.yaml")

	text, err := os.ReadFile(program)
	if err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(program, []byte(strings.Replace(string(text), "talosVersion: "+from, "talosVersion: "+to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rolloutOrder is the order an upgrade must take on haCluster: control planes by name with the
// one leading etcd (read now, through the Talos API) last, then the workers.
func rolloutOrder(t *testing.T, p *lab.Pulumi, l *lab.Lab) (order []string, leader string) {
	t.Helper()

	leader = etcdLeader(t, p, l.Address(11))
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		if n != leader {
			order = append(order, n)
		}
	}

	return append(order, leader, "worker-1", "worker-2"), leader
}

// labNodes are the lab's Talos nodes by hostname.
func labNodes(t testing.TB, l *lab.Lab) map[string]*talosemu.Node {
	t.Helper()

	nodes := map[string]*talosemu.Node{}
	for _, n := range l.Controller.Nodes() {
		nodes[n.Hostname()] = n
	}

	return nodes
}

// previewUpdates runs `pulumi preview --json` and returns the names of the resources of type
// typ that it would update, sorted.
func previewUpdates(t *testing.T, p *lab.Pulumi, typ string) []string {
	t.Helper()

	out := mustRun(t, p, "preview", "--json")

	var preview struct {
		Steps []struct {
			Op  string `json:"op"`
			URN string `json:"urn"`
		} `json:"steps"`
	}

	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &preview); err != nil {
		t.Fatalf("reading the preview: %v\n%s", err, out)
	}

	var names []string

	for _, s := range preview.Steps {
		if strings.Contains(s.URN, "::"+typ+"::") || strings.Contains(s.URN, "$"+typ+"::") {
			if s.Op != "same" {
				names = append(names, s.Op+" "+s.URN[strings.LastIndex(s.URN, "::")+2:])
			}
		}
	}

	slices.Sort(names)

	return names
}

const nodeUpgradeType = "talos-proxmox:lifecycle:NodeUpgrade"

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
	down := map[string]bool{}

	for _, ev := range r.events {
		switch ev.Kind {
		case "down":
			down[ev.Node] = true
		case "boot":
			delete(down, ev.Node)
		}

		most = max(most, len(down))

		if len(down) > 1 {
			for n := range down {
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

// TestRollingTalosUpgrade changes talosVersion across a minor (v1.10 → v1.11, the legacy
// MachineService.Upgrade) and then a patch: the preview lists an update of exactly the five
// nodes, the up reboots them once each, control planes one at a time (the etcd leader last) and
// workers after them,
// etcd keeps its quorum, no VM is replaced, and the preview after shows nothing.
func TestRollingTalosUpgrade(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 16}, func(l *lab.Lab) string { return haCluster(l, "rolling", "v1.10.8") })

	mustRun(t, p, "up", "--yes", "--skip-preview")

	vms := map[string]int{}
	for _, vm := range l.PVE.VMs() {
		vms[vm.Name] = vm.VMID
	}

	all := []string{"cp-1", "cp-2", "cp-3", "worker-1", "worker-2"}

	for _, step := range []struct{ from, to string }{{"v1.10.8", "v1.11.5"}, {"v1.11.5", "v1.11.6"}} {
		t.Run(step.to, func(t *testing.T) {
			setTalosVersion(t, e, step.from, step.to)

			var want []string
			for _, n := range all {
				want = append(want, "update rolling-"+n+"-upgrade")
			}

			if got := previewUpdates(t, p, nodeUpgradeType); !slices.Equal(got, want) {
				t.Errorf("the preview shows node upgrades %v, want %v", got, want)
			}

			boots := map[string]string{}
			for name, n := range labNodes(t, l) {
				boots[name] = n.BootID()
			}

			// The etcd leader goes last among the control planes. The first step starts with
			// the bootstrap node leading, so name order would be wrong.
			order, leader := rolloutOrder(t, p, l)
			if step.from == "v1.10.8" && leader == "cp-3" {
				t.Fatalf("cp-3 leads etcd: the test cannot tell the leader going last from name order")
			}

			l.PVE.ResetCalls()
			start := time.Now()
			out := mustRun(t, p, "up", "--yes", "--skip-preview")
			took := time.Since(start)
			r := eventsSince(l, t, start)

			downs := r.downs()
			if !slices.Equal(downs, order) {
				t.Errorf("nodes went down in the order %v, want each once, control planes first with the etcd leader %s last: %v",
					downs, leader, order)
			}

			if most, cpOverlap := r.maxDown(); most > 1 || cpOverlap {
				t.Errorf("%d nodes were down at once (a control plane among them: %v); upgrade.maxParallel is 1", most, cpOverlap)
			}

			if ev, lost := r.lostQuorum(); lost {
				t.Errorf("etcd lost its quorum at %s", ev)
			}

			for name, n := range labNodes(t, l) {
				if v := n.Running().Version; v != step.to {
					t.Errorf("%s runs %s after the up, want %s", name, v, step.to)
				}

				if n.BootID() == boots[name] {
					t.Errorf("%s did not reboot", name)
				}
			}

			if c := l.PVE.CallCount("POST /nodes/{node}/qemu") + l.PVE.CallCount("DELETE /nodes/{node}/qemu/{vmid}"); c != 0 {
				t.Errorf("%d VM creates/deletes during the upgrade; VMs must be kept", c)
			}

			for _, vm := range l.PVE.VMs() {
				if vms[vm.Name] != vm.VMID {
					t.Errorf("VM %s changed id %d → %d", vm.Name, vms[vm.Name], vm.VMID)
				}
			}

			mustRun(t, p, "preview", "--expect-no-changes")

			var log []string
			for _, ev := range r.events {
				log = append(log, ev.Time.Format("15:04:05.000")+" "+ev.String())
			}

			t.Logf("%s → %s took %s; events:\n%s\nup:\n%s", step.from, step.to, took.Round(time.Millisecond), strings.Join(log, "\n"), out)
		})
	}
}
