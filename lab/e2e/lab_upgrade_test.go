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
// one leading etcd (read now, through the Talos API) last, then the workers by name.
func rolloutOrder(t *testing.T, p *lab.Pulumi, l *lab.Lab) (order []string, leader string) {
	t.Helper()

	leader = etcdLeader(t, p, l.Address(11))
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		if n != leader {
			order = append(order, n)
		}
	}

	return append(append(order, leader), workerNames(t, l)...), leader
}

// workerNames are the lab's workers by name.
func workerNames(t testing.TB, l *lab.Lab) []string {
	t.Helper()

	var workers []string

	for name := range labNodes(t, l) {
		if strings.HasPrefix(name, "worker-") {
			workers = append(workers, name)
		}
	}

	slices.Sort(workers)

	return workers
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

	return previewChanges(t, p, typ)[typ]
}

// previewChanges runs `pulumi preview --json` once and returns, for each of types, the steps
// other than same as "<op> <resource name>", sorted.
func previewChanges(t *testing.T, p *lab.Pulumi, types ...string) map[string][]string {
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

	changes := map[string][]string{}

	for _, s := range preview.Steps {
		for _, typ := range types {
			if (strings.Contains(s.URN, "::"+typ+"::") || strings.Contains(s.URN, "$"+typ+"::")) && s.Op != "same" {
				changes[typ] = append(changes[typ], s.Op+" "+s.URN[strings.LastIndex(s.URN, "::")+2:])
			}
		}
	}

	for _, names := range changes {
		slices.Sort(names)
	}

	return changes
}

const nodeUpgradeType = "talos-proxmox:lifecycle:NodeUpgrade"

// TestRollingTalosUpgrade runs the rollouts of a running cluster of 3 control planes and 3
// workers. It changes talosVersion across a minor (v1.10 → v1.11, the legacy
// MachineService.Upgrade) with the default upgrade.maxParallel 1, then a patch with
// upgrade.maxParallel 2 (the workers' reboots taking 4 s, so that two reboots can overlap): the
// preview lists an update of exactly the six nodes; the up reboots each once, control planes one
// at a time (the etcd leader last), then the workers, one at a time, then at most two at once and
// two at once at some point (worker-3 waits for worker-1); etcd keeps its quorum, no VM is
// replaced, and the preview after shows nothing. Then, with upgrade.maxParallel still 2, a
// configuration change that Talos cannot apply live (rebootingConfigChange).
func TestRollingTalosUpgrade(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 16}, func(l *lab.Lab) string {
		return withWorker3(l, haCluster(l, "rolling", "v1.10.8"))
	})

	mustRun(t, p, "up", "--yes", "--skip-preview")

	vms := vmIDs(l)
	all := []string{"cp-1", "cp-2", "cp-3", "worker-1", "worker-2", "worker-3"}

	for _, step := range []struct {
		from, to    string
		maxParallel int
	}{{"v1.10.8", "v1.11.5", 1}, {"v1.11.5", "v1.11.6", 2}} {
		t.Run(step.to, func(t *testing.T) {
			setTalosVersion(t, e, step.from, step.to)

			if step.maxParallel > 1 {
				setMaxParallel(t, e, l, step.maxParallel)
			}

			var want []string
			for _, n := range all {
				want = append(want, "update rolling-"+n+"-upgrade")
			}

			if got := previewUpdates(t, p, nodeUpgradeType); !slices.Equal(got, want) {
				t.Errorf("the preview shows node upgrades %v, want %v", got, want)
			}

			boots := bootIDs(t, l)

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

			r.check(t, order, true, step.maxParallel)

			for name, n := range labNodes(t, l) {
				if v := n.Running().Version; v != step.to {
					t.Errorf("%s runs %s after the up, want %s", name, v, step.to)
				}

				if n.BootID() == boots[name] {
					t.Errorf("%s did not reboot", name)
				}
			}

			keptVMs(t, l, vms)
			mustRun(t, p, "preview", "--expect-no-changes")

			t.Logf("%s → %s (upgrade.maxParallel %d) took %s; events:\n%s\nup:\n%s", step.from, step.to, step.maxParallel,
				took.Round(time.Millisecond), r, out)
		})
	}

	t.Run("reboot-config", func(t *testing.T) { rebootingConfigChange(t, e, l, p, vms, 2) })
}

// withWorker3 adds a third worker to haCluster's program, so that upgrade.maxParallel 2 has more
// workers than it lets reboot at once.
func withWorker3(l *lab.Lab, program string) string {
	return strings.Replace(program, "outputs:\n",
		fmt.Sprintf("        worker-3: {hostNode: pve3, role: worker, ip: %s}\noutputs:\n", l.Address(23)), 1)
}

// setMaxParallel sets upgrade.maxParallel in haCluster's program and makes the workers' reboots
// take 4 s: long enough for two workers that start their reboots together to be down at the same
// time, which a lab reboot of 50 ms leaves to chance.
func setMaxParallel(t *testing.T, e *env, l *lab.Lab, n int) {
	t.Helper()

	editProgram(t, e, "      kubernetesVersion: v1.33.5\n", fmt.Sprintf("      kubernetesVersion: v1.33.5\n      upgrade: {maxParallel: %d}\n", n))

	for _, name := range workerNames(t, l) {
		labNodes(t, l)[name].SetRebootDelay(4 * time.Second)
	}
}
