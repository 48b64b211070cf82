//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// The latency injected into the Proxmox fake: a VM create task runs 2 s and a start task 3 s,
// so the critical path of one node is download → create (2 s) → start (3 s) → apply →
// bootstrap → kubeconfig.
const (
	createLatency = 2 * time.Second
	startLatency  = 3 * time.Second
	parallel      = 32
)

// benchProgram is a YAML program of n nodes (three control planes, the rest workers) over the
// lab's first hosts Proxmox hosts, with pinned VM ids.
func benchProgram(l *lab.Lab, n, hosts int) string {
	var b strings.Builder
	b.WriteString("name: bench\nruntime: yaml\nconfig:\n  factoryUrl:\n    type: string\nresources:\n  bench:\n" +
		"    type: talos-proxmox:index:TalosProxmoxCluster\n    properties:\n      clusterName: bench\n" +
		"      talosVersion: v1.11.5\n      vip: " + l.Address(10) + "\n      network:\n        gateway: " + l.Address(1) + "\n" +
		"      image:\n        factoryUrl: ${factoryUrl}\n      nodes:\n")

	for i := range n {
		role, name := "worker", fmt.Sprintf("w-%d", i)
		if i < 3 {
			role, name = "controlplane", fmt.Sprintf("cp-%d", i+1)
		}

		fmt.Fprintf(&b, "        %s:\n          hostNode: pve%d\n          role: %s\n          ip: %s\n          vmId: %d\n",
			name, i%hosts+1, role, l.Address(11+i), 900+i)
	}

	b.WriteString("outputs:\n  endpoint: ${bench.endpoint}\n  kubeconfig: ${bench.kubeconfig}\n")

	return b.String()
}

// BenchmarkLabUp measures the wall time of `pulumi up --parallel 32` of whole clusters on the
// lab, with VM create and start latency injected. Goal: 9 nodes ≤ 1.3 × 3 nodes, and ≤ 1.2 × the
// critical path. Run with `make bench`.
func BenchmarkLabUp(b *testing.B) {
	for _, n := range []int{3, 9} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				elapsed, critical := labUp(b, n, 40+n)

				b.ReportMetric(elapsed.Seconds(), "s/up")
				b.ReportMetric(elapsed.Seconds()/critical.Seconds(), "x-critical-path")
			}
		})
	}
}

// labUpRuns is how many ups of 9 nodes BenchmarkLabUpSpread times.
const labUpRuns = 5

// BenchmarkLabUpSpread runs the 9-node `up` of BenchmarkLabUp labUpRuns times, each on a new
// lab, and prints `lab up ratio: <min> <median> <max>` against each run's critical path. Goal:
// every run ≤ 1.2. Run with `make bench`.
func BenchmarkLabUpSpread(b *testing.B) {
	for b.Loop() {
		var ratios []float64

		for i := range labUpRuns {
			elapsed, critical := labUp(b, 9, 90+i)
			ratios = append(ratios, elapsed.Seconds()/critical.Seconds())
		}

		slices.Sort(ratios)
		fmt.Printf("lab up ratio: %.2f %.2f %.2f\n", ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1])
		b.ReportMetric(ratios[len(ratios)-1], "x-critical-path-max")
	}
}

// labUp times `pulumi up` of benchProgram's n nodes on a new lab (subnet) whose Proxmox answers
// VM create and start tasks with the injected latency. Only the up is timed. The critical path
// is what no implementation could avoid: the injected latency of one node's VM create and start
// tasks, plus the time the lab's cluster takes from its bootstrap until it is whole (see
// clusterStart) — etcd, the real control plane and the emulated kubelets and CNI starting, which
// the health gate must wait for.
func labUp(b *testing.B, n, subnet int) (elapsed, critical time.Duration) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()

	e := newEnv(b)
	l, p := onLab(b, e, lab.Options{Subnet: subnet, PVE: func(o *pvefake.Options) {
		o.RouteLatency = map[string]time.Duration{
			"POST /nodes/{node}/qemu":                     createLatency,
			"POST /nodes/{node}/qemu/{vmid}/status/start": startLatency,
		}
	}}, func(l *lab.Lab) string { return benchProgram(l, n, 2) })
	defer l.Close()

	b.StartTimer()
	start := time.Now()

	if out, err := p.Run(b.Context(), "up", "--yes", "--skip-preview", fmt.Sprintf("--parallel=%d", parallel)); err != nil {
		b.Fatalf("up: %v\n%s", err, out)
	}

	elapsed = time.Since(start)
	b.StopTimer()

	return elapsed, createLatency + startLatency + clusterStart(b, l, n, min(n, 3))
}

// clusterStart is how long the lab's cluster took from the moment it could start — its bootstrap
// (the Bootstrap API call) and the last node's boot with its configuration, whichever is later —
// until it was whole: all cps etcd members running and each of the n Nodes Ready, whichever came
// last — what the health gate waits for. A node configured late (its VM created after the
// others) therefore counts against the up, not the path. The times come from the lab's event
// log, to the millisecond (a Node's Ready condition keeps its transition to the second only).
func clusterStart(b *testing.B, l *lab.Lab, n, cps int) time.Duration {
	var bootstrap, booted, etcd time.Time

	ready := map[string]time.Time{}

	for _, ev := range eventsSince(l, b, time.Time{}).events {
		switch {
		case ev.Kind == "bootstrap" && bootstrap.IsZero():
			bootstrap = ev.Time
		case ev.Kind == "boot" && ev.Node != "" && ev.Time.After(booted):
			booted = ev.Time
		case ev.Kind == "etcd" && ev.Running == cps && etcd.IsZero():
			etcd = ev.Time
		case ev.Kind == "ready" && ready[ev.Node].IsZero():
			ready[ev.Node] = ev.Time
		}
	}

	if bootstrap.IsZero() || etcd.IsZero() || len(ready) != n {
		b.Fatalf("the lab's events show no bootstrap (%v), no %d etcd members running (%v) or not %d Nodes Ready (%v)",
			bootstrap, cps, etcd, n, ready)
	}

	whole := etcd
	for _, t := range ready {
		if t.After(whole) {
			whole = t
		}
	}

	if booted.After(bootstrap) {
		bootstrap = booted
	}

	return whole.Sub(bootstrap)
}

// rollingCases are BenchmarkRollingUpgrade's runs: the 2 s reboot with upgrade.maxParallel 1
// and 3, and a 10 s reboot, which shows which part of the overhead is per `up` and which per node.
var rollingCases = []struct {
	name        string
	maxParallel int
	reboot      time.Duration
}{
	{"maxParallel=1", 1, 2 * time.Second},
	{"maxParallel=3", 3, 2 * time.Second},
	{"maxParallel=1,reboot=10s", 1, 10 * time.Second},
}

// BenchmarkRollingUpgrade measures the `pulumi up` of a Talos patch upgrade (v1.11.5 → v1.11.6)
// of 3 control planes and 6 workers, each reboot taking 2 s (and 10 s), with upgrade.maxParallel
// 1 and 3. The serial lower bound is the sum of the reboots on the critical path: control planes
// one at a time, then ceil(workers / maxParallel) rounds. Goal: ≤ 1.15 × that bound. It also
// reports the rollout alone and the floor: the bound plus a no-op `up` of the same stack. Run with
// `make bench`.
func BenchmarkRollingUpgrade(b *testing.B) {
	for i, c := range rollingCases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()

				e := newEnv(b)
				l, p := onLab(b, e, lab.Options{Subnet: 61 + 2*i, Node: func(_ int, o *talosemu.Options) {
					o.RebootDelay = c.reboot
				}}, func(l *lab.Lab) string {
					return strings.Replace(benchProgram(l, 9, 2), "      vip:", fmt.Sprintf("      upgrade: {maxParallel: %d}\n      vip:", c.maxParallel), 1)
				})

				up := func(what string, extra ...string) {
					args := append([]string{"up", "--yes", "--skip-preview", fmt.Sprintf("--parallel=%d", parallel)}, extra...)
					if out, err := p.Run(b.Context(), args...); err != nil {
						b.Fatalf("%s: %v\n%s", what, err, out)
					}
				}

				up("up")

				editProgram(b, e, "talosVersion: v1.11.5", "talosVersion: v1.11.6")

				b.StartTimer()
				start := time.Now()

				up("upgrade")

				elapsed := time.Since(start)
				b.StopTimer()

				bound := time.Duration(3+(6+c.maxParallel-1)/c.maxParallel) * c.reboot
				b.ReportMetric(elapsed.Seconds(), "s/upgrade")
				b.ReportMetric(elapsed.Seconds()/bound.Seconds(), "x-serial-bound")

				// The rollout alone: from the first node going down to the last one back. Before it:
				// engine, plugins, Construct, the first node's pre-gate, drain and upgrade call;
				// after it: the last node's post-gate and uncordon, the configuration applies, the
				// health gate.
				if first, last, ok := rolloutSpan(b, l, start); ok {
					b.ReportMetric(last.Sub(first).Seconds()/bound.Seconds(), "x-serial-bound-rollout")
					b.ReportMetric(first.Sub(start).Seconds(), "s/before-rollout")
					b.ReportMetric(start.Add(elapsed).Sub(last).Seconds(), "s/after-rollout")
				}

				// The floor: the bound plus the same stack's `up` with nothing to change (CLI,
				// language host, plugins, Construct, every resource's check and diff), which the
				// upgrade's `up` pays as well before and around its rollout.
				noop := time.Now()

				up("no-op up (it must change nothing)", "--expect-no-changes")

				floor := time.Since(noop)
				b.ReportMetric(floor.Seconds(), "s/noop-up")
				b.ReportMetric((bound+floor).Seconds()/bound.Seconds(), "x-serial-bound-floor")

				l.Close()
				b.StartTimer()
			}
		})
	}
}

// rolloutSpan is when the first node went down and the last came back after since.
func rolloutSpan(b *testing.B, l *lab.Lab, since time.Time) (first, last time.Time, ok bool) {
	for _, ev := range eventsSince(l, b, since).events {
		switch {
		case ev.Kind == "down" && first.IsZero():
			first = ev.Time
		case ev.Kind == "boot":
			last = ev.Time
		}
	}

	return first, last, !first.IsZero() && last.After(first)
}

// BenchmarkDestroy measures `pulumi destroy` of a 3-control-plane, 2-worker cluster after its
// `up`. The lifecycle resources' deletes do nothing (no drain, no etcd leave), so the destroy
// costs what deleting the VMs costs. To compare with the component before the day-2 resources,
// build that commit's plugin and point TALOS_PROXMOX_PLUGIN at it (docs/performance.md).
func BenchmarkDestroy(b *testing.B) {
	for b.Loop() {
		b.StopTimer()

		e := newEnv(b)
		l, p := onLab(b, e, lab.Options{Subnet: 70}, func(l *lab.Lab) string { return haCluster(l, "destroy", "v1.11.5") })

		if out, err := p.Run(b.Context(), "up", "--yes", "--skip-preview"); err != nil {
			b.Fatalf("up: %v\n%s", err, out)
		}

		b.StartTimer()
		start := time.Now()

		out, err := p.Run(b.Context(), "destroy", "--yes", "--skip-preview")
		if err != nil {
			b.Fatalf("destroy: %v\n%s", err, out)
		}

		elapsed := time.Since(start)
		b.StopTimer()

		if strings.Contains(out, "removed from the cluster") || strings.Contains(out, "drain") {
			b.Errorf("the destroy drained or removed nodes one by one:\n%s", out)
		}

		if vms := l.PVE.VMs(); len(vms) != 0 {
			b.Errorf("%d VMs left after the destroy", len(vms))
		}

		b.ReportMetric(elapsed.Seconds(), "s/destroy")
		l.Close()
		b.StartTimer()
	}
}
