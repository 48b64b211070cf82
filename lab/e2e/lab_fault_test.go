//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// The fault model of these tests: every call to the Proxmox API fails with probability
// faultRate, with a transient 500 ("cfs-lock … got lock request timeout") or 503 answered
// before the call has any effect, as a busy pveproxy/pvedaemon rejects a request. Whether the
// n-th call of a route fails depends only on the seed, the route and n (pvefake.SetFailureRate),
// so a seed replays the same failures whatever the interleaving of concurrent calls.
//
// Task status reads (taskStatusRoute) are exempt: bpg v0.111.1 retries them only on HTTP 400
// (proxmox/nodes/tasks/tasks.go, WaitForTask), so one failed read after a VM create task
// succeeded makes it give up before it records the VM id, and the next `up` creates a second VM
// (TestTaskStatusFailureOrphansVM pins this). With status reads faulted too, each of the seeds
// 1, 2 and 3 ends with a duplicate VM under persistent faults.
const (
	faultRate       = 0.1
	taskStatusRoute = "GET /nodes/{node}/tasks/{upid}/status"
	// maxFaultyRuns bounds the `up`s (and `destroy`s) run while faults stay on. The seeds below
	// needed 3 to 8 ups; once everything exists an `up --refresh` makes 14 calls, so each
	// succeeds with a chance of 0.9^14 ≈ 23%, and 30 runs leave room for unlucky interleavings.
	maxFaultyRuns = 30
)

var (
	// The first faulty `up` of the small cluster fails, with seed 1, on a download (no file);
	// with 5, on a VM start (a stopped VM with initialization errors); with 8, on a VM create
	// (retried), a disk resize and a start (two VMs half made).
	afterFaultSeeds = []uint64{1, 5, 8}
	underFaultSeeds = []uint64{1, 2, 3}
)

// faultyLab is a lab with the small cluster's stack; faults are switched on by the caller.
func faultyLab(t *testing.T, name string, subnet int) (*lab.Lab, *lab.Pulumi) {
	t.Helper()

	l, p := onSmallCluster(t, newEnv(t), name, lab.Options{Subnet: subnet})
	l.PVE.SetRouteFailureRate(taskStatusRoute, 0)

	return l, p
}

func injectedTotal(l *lab.Lab) int {
	n := 0
	for _, c := range l.PVE.InjectedFailures() {
		n += c
	}

	return n
}

// TestUpConvergesAfterFaults: with 10% of the Proxmox calls failing, the first `up` either
// succeeds or fails leaving the state in agreement with Proxmox; once the faults stop, one
// `up --refresh` converges: the state and Proxmox agree exactly, both VMs run, both Talos nodes
// are configured, preview shows no changes, and destroy leaves Proxmox empty.
//
// The second `up` refreshes, as docs/recovery.md says to: a VM create that failed after the VM
// got its id is recorded with the planned values, so with seed 8 a plain `up` succeeds but
// leaves a VM's disk at the imported image's 1 GiB (its resize was refused), and the next
// preview wants 20.
func TestUpConvergesAfterFaults(t *testing.T) {
	t.Parallel()

	for i, seed := range afterFaultSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel() // the failures depend on the seed and each route's call count, not on timing

			l, p := faultyLab(t, "faults", 21+i)
			l.PVE.SetFailureRate(faultRate, seed)

			start := time.Now()
			out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
			first := exportState(t, p)
			halfMade := 0
			for _, r := range first.Deployment.Resources {
				if len(r.InitErrors) > 0 {
					halfMade++
				}
			}

			t.Logf("first up with injected failures %v in %s (%d resources half made): %v", l.PVE.InjectedFailures(),
				time.Since(start).Round(time.Millisecond), halfMade, err)

			if injectedTotal(l) == 0 {
				t.Fatalf("no failure was injected:\n%s", out)
			}

			assertStateAgrees(t, l, first)

			l.PVE.SetFailureRate(0, seed)

			if err != nil {
				start = time.Now()
				if out, err := p.Run(t.Context(), "up", "--refresh", "--yes", "--skip-preview"); err != nil {
					t.Fatalf("the second up, without faults, failed: %v\n%s", err, out)
				}

				t.Logf("second up converged in %s", time.Since(start).Round(time.Millisecond))
			}

			assertConverged(t, l, p)
			previewDestroyEmpty(t, l, p)
		})
	}
}

// TestUpConvergesUnderFaults: the faults never stop. Every `up` leaves the state in agreement
// with Proxmox, the ups converge within maxFaultyRuns, preview then shows no changes, and
// repeated destroys, still under faults, leave Proxmox empty.
func TestUpConvergesUnderFaults(t *testing.T) {
	t.Parallel()

	for i, seed := range underFaultSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()

			l, p := faultyLab(t, "faults", 24+i)
			l.PVE.SetFailureRate(faultRate, seed)

			runUntilSuccess(t, l, p, "up", "--refresh", "--yes", "--skip-preview")
			assertConverged(t, l, p)

			if out, err := p.Run(t.Context(), "preview", "--expect-no-changes", "--diff"); err != nil {
				t.Errorf("preview shows changes: %v\n%s", err, out)
			}

			runUntilSuccess(t, l, p, "destroy", "--yes", "--skip-preview")
			assertProxmoxEmpty(t, l, p)

			if injectedTotal(l) == 0 {
				t.Error("no failure was injected")
			}

			t.Logf("injected failures: %v", l.PVE.InjectedFailures())
		})
	}
}

// runUntilSuccess runs a command until it succeeds, at most maxFaultyRuns times, checking after
// every run that the state agrees with Proxmox.
func runUntilSuccess(t *testing.T, l *lab.Lab, p *lab.Pulumi, args ...string) {
	t.Helper()

	start := time.Now()

	var out string
	for run := 1; run <= maxFaultyRuns; run++ {
		var err error

		out, err = p.Run(t.Context(), args...)
		assertStateAgrees(t, l, exportState(t, p))

		if err == nil {
			t.Logf("%s succeeded at run %d, after %s", args[0], run, time.Since(start).Round(time.Millisecond))
			return
		}
	}

	t.Fatalf("%s still fails after %d runs:\n%s", args[0], maxFaultyRuns, out)
}

// TestTaskStatusFailureOrphansVM pins the bpg v0.111.1 behaviour the fault model works around:
// one failed status read of a VM create task that has succeeded fails the create before bpg
// records the VM id, so the VM exists in Proxmox but not in the state, and the next `up`
// creates a second VM of the same name. Should bpg retry these reads one day, this test fails:
// then drop the exemption of task status reads above.
func TestTaskStatusFailureOrphansVM(t *testing.T) {
	t.Parallel()

	l, p := onSmallCluster(t, newEnv(t), "orphan", lab.Options{Subnet: 27})
	l.PVE.FailNextTaskStatus("qmcreate", 1)

	out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err == nil || !strings.Contains(out, "error while waiting for task") {
		t.Fatalf("up did not fail on the task status read: %v\n%s", err, out)
	}

	stateVMs, _ := proxmoxInState(exportState(t, p))
	fakeVMs, _, _ := proxmoxInFake(l)

	var orphans []string
	for _, vm := range fakeVMs {
		if !slices.Contains(stateVMs, vm) {
			orphans = append(orphans, vm)
		}
	}

	if len(orphans) != 1 {
		t.Fatalf("want one VM in Proxmox but not in the state; state %v, Proxmox %v", stateVMs, fakeVMs)
	}

	// docs/recovery.md: the error names the task, whose UPID holds the orphan's VM id.
	vmid := orphans[0][strings.Index(orphans[0], "/")+1 : strings.Index(orphans[0], " ")]
	if !strings.Contains(out, ":qmcreate:"+vmid+":") {
		t.Errorf("the error does not name the create task of VM %s:\n%s", vmid, out)
	}

	if out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("second up: %v\n%s", err, out)
	}

	name := orphans[0][strings.Index(orphans[0], " ")+1:]

	same := 0
	for _, vm := range l.PVE.VMs() {
		if vm.Name == name {
			same++
		}
	}

	if same != 2 {
		t.Errorf("want the orphan and its duplicate named %s in Proxmox, have %v", name, l.PVE.VMs())
	}
}
