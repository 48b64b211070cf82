//go:build e2e

package e2e

import (
	"fmt"
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

// benchProgram is a YAML program of n nodes (three control planes, the rest workers) over two
// hosts with pinned VM ids.
func benchProgram(l *lab.Lab, n int) string {
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
			name, i%2+1, role, l.Address(11+i), 900+i)
	}

	b.WriteString("outputs:\n  endpoint: ${bench.endpoint}\n")

	return b.String()
}

// BenchmarkLabUp measures the wall time of `pulumi up --parallel 32` of whole clusters on the
// lab, with VM create and start latency injected. Goal: 9 nodes ≤ 1.3 × 3 nodes, and ≤ 1.2 × the
// critical path. Run with `make bench`.
func BenchmarkLabUp(b *testing.B) {
	for _, n := range []int{3, 9} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()

				e := newEnv(b)
				l, p := onLab(b, e, lab.Options{Subnet: 40 + n, PVE: func(o *pvefake.Options) {
					o.RouteLatency = map[string]time.Duration{
						"POST /nodes/{node}/qemu":                     createLatency,
						"POST /nodes/{node}/qemu/{vmid}/status/start": startLatency,
					}
				}}, func(l *lab.Lab) string { return benchProgram(l, n) })

				b.StartTimer()
				start := time.Now()

				if out, err := p.Run(b.Context(), "up", "--yes", "--skip-preview", fmt.Sprintf("--parallel=%d", parallel)); err != nil {
					b.Fatalf("up: %v\n%s", err, out)
				}

				elapsed := time.Since(start)
				b.StopTimer()

				critical := createLatency + startLatency
				b.ReportMetric(elapsed.Seconds(), "s/up")
				b.ReportMetric(elapsed.Seconds()/critical.Seconds(), "x-injected-latency")

				l.Close()
				b.StartTimer()
			}
		})
	}
}

// upgradeReboot is the reboot injected into every node for BenchmarkRollingUpgrade.
const upgradeReboot = 2 * time.Second

// BenchmarkRollingUpgrade measures the `pulumi up` of a Talos patch upgrade (v1.11.5 → v1.11.6)
// of 3 control planes and 6 workers, each reboot taking 2 s, with upgrade.maxParallel 1 and 3.
// The serial lower bound is the sum of the reboots on the critical path: control planes one at
// a time, then ceil(workers / maxParallel) rounds. Goal: ≤ 1.15 × that bound. Run with `make bench`.
func BenchmarkRollingUpgrade(b *testing.B) {
	for _, par := range []int{1, 3} {
		b.Run(fmt.Sprintf("maxParallel=%d", par), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()

				e := newEnv(b)
				l, p := onLab(b, e, lab.Options{Subnet: 60 + par, Node: func(_ int, o *talosemu.Options) {
					o.RebootDelay = upgradeReboot
				}}, func(l *lab.Lab) string {
					return strings.Replace(benchProgram(l, 9), "      vip:", fmt.Sprintf("      upgrade: {maxParallel: %d}\n      vip:", par), 1)
				})

				if out, err := p.Run(b.Context(), "up", "--yes", "--skip-preview", fmt.Sprintf("--parallel=%d", parallel)); err != nil {
					b.Fatalf("up: %v\n%s", err, out)
				}

				editProgram(b, e, "talosVersion: v1.11.5", "talosVersion: v1.11.6")

				b.StartTimer()
				start := time.Now()

				if out, err := p.Run(b.Context(), "up", "--yes", "--skip-preview", fmt.Sprintf("--parallel=%d", parallel)); err != nil {
					b.Fatalf("upgrade: %v\n%s", err, out)
				}

				elapsed := time.Since(start)
				b.StopTimer()

				bound := time.Duration(3+(6+par-1)/par) * upgradeReboot
				b.ReportMetric(elapsed.Seconds(), "s/upgrade")
				b.ReportMetric(elapsed.Seconds()/bound.Seconds(), "x-serial-bound")

				// The rollout alone: from the first node going down to the last one back, without
				// what every `up` costs before (engine, plugins, Construct) and after (the
				// configuration applies, the health gate).
				if first, last, ok := rolloutSpan(b, l, start); ok {
					b.ReportMetric(last.Sub(first).Seconds()/bound.Seconds(), "x-serial-bound-rollout")
				}

				l.Close()
				b.StartTimer()
			}
		})
	}
}

// rolloutSpan is when the first node went down and the last came back after since.
func rolloutSpan(b *testing.B, l *lab.Lab, since time.Time) (first, last time.Time, ok bool) {
	for _, n := range labNodes(b, l) {
		for _, ev := range n.Cluster().Events() {
			switch {
			case !ev.Time.After(since):
			case ev.Kind == "down" && first.IsZero():
				first = ev.Time
			case ev.Kind == "boot":
				last = ev.Time
			}
		}

		break // one cluster: every node shares its log
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
