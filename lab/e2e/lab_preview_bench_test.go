//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// previewRuns is how many no-op previews of each program BenchmarkPreview times.
const previewRuns = 9

// BenchmarkPreview compares a no-op `pulumi preview` of a 3-control-plane cluster through the
// component (testdata/preview/component) with the same cluster written by hand with the same
// proxmoxve and talos resources and invokes (testdata/preview/handwritten), each on its own lab
// after its `up`. Both are Go programs run inline through the Automation API (one binary built
// beforehand), so no compile is timed: a timed run is the binary asking the CLI for a preview
// that must show no change. The previews alternate; the medians are compared. It prints
// `preview ratio: <x>` (component / hand-written). Goal: ≤ 1.2. Run with `make bench`.
func BenchmarkPreview(b *testing.B) {
	bin := previewPrograms(b)

	run := func(p *lab.Pulumi, prog, command string) error {
		cmd := exec.CommandContext(b.Context(), bin, "-program", prog, "-workdir", p.Dir, "-stack", "lab", command)
		cmd.Env = p.Env

		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s of the %s program: %w\n%s", command, prog, err, out)
		}

		return nil
	}

	for b.Loop() {
		b.StopTimer()

		stacks := map[string]*lab.Pulumi{}

		for i, prog := range []string{"component", "handwritten"} {
			e := newEnv(b)
			_, p := onLab(b, e, lab.Options{Subnet: 45 + i}, func(*lab.Lab) string {
				return "name: preview-" + prog + "\nruntime: go\n"
			})

			if err := run(p, prog, "up"); err != nil {
				b.Fatal(err)
			}

			// One untimed preview each: the first run after an up warms what a user's second
			// preview finds warm too (plugin binaries in the page cache, the render cache).
			if err := run(p, prog, "preview"); err != nil {
				b.Fatal(err)
			}

			stacks[prog] = p
		}

		compareMedians(b, "preview ratio", "no-op preview", [2]side{{"component", "component", "component"}, {"handwritten", "hand-written", "handwritten"}},
			func(prog string) time.Duration {
				start := time.Now()

				if err := run(stacks[prog], prog, "preview"); err != nil {
					b.Fatal(err)
				}

				return time.Since(start)
			})
	}
}

// side is one of the two runs compareMedians compares: its key, how the log names it, and the
// suffix of its time metric ("s/preview-<metric>").
type side struct{ key, name, metric string }

// compareMedians times run of each side previewRuns times, alternating, and reports the ratio of
// the first side's median to the second's: printed as "<label>: <x>" (what `make bench` shows),
// logged with every time, and as metrics ("x-<second side's metric>" for the ratio).
func compareMedians(b *testing.B, label, what string, sides [2]side, run func(key string) time.Duration) {
	b.Helper()

	took := map[string][]time.Duration{}

	b.StartTimer()

	for range previewRuns {
		for _, s := range sides {
			took[s.key] = append(took[s.key], run(s.key))
		}
	}

	b.StopTimer()

	first, second := median(took[sides[0].key]), median(took[sides[1].key])
	ratio := first.Seconds() / second.Seconds()

	fmt.Printf("%s: %.2f\n", label, ratio)
	b.Logf("%s, median of %d: %s %s %v, %s %s %v", what, previewRuns,
		sides[0].name, first.Round(time.Millisecond), took[sides[0].key], sides[1].name, second.Round(time.Millisecond), took[sides[1].key])
	b.ReportMetric(first.Seconds(), "s/preview-"+sides[0].metric)
	b.ReportMetric(second.Seconds(), "s/preview-"+sides[1].metric)
	b.ReportMetric(ratio, "x-"+sides[1].metric)
	b.StartTimer()
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)

	return s[len(s)/2]
}

// BenchmarkDiffPreview times `pulumi preview` of a 9-node cluster (benchProgram) whose nameservers
// change, so every node's configuration changes, with the redacted configuration diffs and drift
// reads (the default) and without them (TALOS_PROXMOX_CONFIG_DIFF=off: each changed node only
// asked how it applies the change, as previews were before the diffs). The previews alternate;
// it prints `diff preview ratio: <x>` (with / without, medians). Goal: ≤ 1.3. Run with `make bench`.
func BenchmarkDiffPreview(b *testing.B) {
	for b.Loop() {
		b.StopTimer()

		e := newEnv(b)
		l, p := onLab(b, e, lab.Options{Subnet: 52}, func(l *lab.Lab) string { return benchProgram(l, 9, 2) })

		if out, err := p.Run(b.Context(), "up", "--yes", "--skip-preview", "--parallel", "32"); err != nil {
			b.Fatalf("up: %v\n%s", err, out)
		}

		editProgram(b, e, "        gateway: "+l.Address(1)+"\n", "        gateway: "+l.Address(1)+"\n        nameservers: [1.1.1.1, 8.8.8.8]\n")

		modes := map[string]*lab.Pulumi{"with": p, "without": {Bin: p.Bin, Dir: p.Dir, Env: append(slices.Clone(p.Env), "TALOS_PROXMOX_CONFIG_DIFF=off")}}

		preview := func(mode string) time.Duration {
			start := time.Now()

			out, err := modes[mode].Run(b.Context(), "preview")
			if err != nil {
				b.Fatalf("preview %s diffs: %v\n%s", mode, err, out)
			}

			want := map[string]string{"with": "configuration changes: ", "without": "the configuration changes; applies live"}[mode]
			if strings.Count(out, "-node-config update [diff: ") != 9 || !strings.Contains(out, want) {
				b.Fatalf("the preview %s diffs does not update 9 node configurations saying %q:\n%s", mode, want, out)
			}

			return time.Since(start)
		}

		preview("with") // untimed: warms what a user's second preview finds warm too
		preview("without")

		compareMedians(b, "diff preview ratio", "preview of a change on 9 nodes",
			[2]side{{"with", "with diffs", "with-diffs"}, {"without", "without", "without"}}, preview)
	}
}
