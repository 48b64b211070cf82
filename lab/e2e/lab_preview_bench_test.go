//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
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
	bin := filepath.Join(b.TempDir(), "preview")
	build := exec.CommandContext(b.Context(), "go", "build", "-o", bin, ".")
	build.Dir = repoPath(b, "lab/e2e/testdata/preview")

	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the programs: %v\n%s", err, out)
	}

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

		took := map[string][]time.Duration{}

		b.StartTimer()

		for range previewRuns {
			for _, prog := range []string{"component", "handwritten"} {
				start := time.Now()

				if err := run(stacks[prog], prog, "preview"); err != nil {
					b.Fatal(err)
				}

				took[prog] = append(took[prog], time.Since(start))
			}
		}

		b.StopTimer()

		comp, hand := median(took["component"]), median(took["handwritten"])
		ratio := comp.Seconds() / hand.Seconds()

		fmt.Printf("preview ratio: %.2f\n", ratio)
		b.Logf("no-op preview, median of %d: component %s %v, hand-written %s %v", previewRuns,
			comp.Round(time.Millisecond), took["component"], hand.Round(time.Millisecond), took["handwritten"])
		b.ReportMetric(comp.Seconds(), "s/preview-component")
		b.ReportMetric(hand.Seconds(), "s/preview-handwritten")
		b.ReportMetric(ratio, "x-handwritten")
		b.StartTimer()
	}
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
		l, p := onLab(b, e, lab.Options{Subnet: 52}, func(l *lab.Lab) string { return benchProgram(l, 9) })

		if out, err := p.Run(b.Context(), "up", "--yes", "--skip-preview", "--parallel", "32"); err != nil {
			b.Fatalf("up: %v\n%s", err, out)
		}

		editProgram(b, e, "        gateway: "+l.Address(1)+"\n", "        gateway: "+l.Address(1)+"\n        nameservers: [1.1.1.1, 8.8.8.8]\n")

		modes := map[string]*lab.Pulumi{"with": p, "without": {Bin: p.Bin, Dir: p.Dir, Env: append(slices.Clone(p.Env), "TALOS_PROXMOX_CONFIG_DIFF=off")}}
		took := map[string][]time.Duration{}

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

		b.StartTimer()

		for range previewRuns {
			for _, mode := range []string{"with", "without"} {
				took[mode] = append(took[mode], preview(mode))
			}
		}

		b.StopTimer()

		with, without := median(took["with"]), median(took["without"])
		ratio := with.Seconds() / without.Seconds()

		fmt.Printf("diff preview ratio: %.2f\n", ratio)
		b.Logf("preview of a change on 9 nodes, median of %d: with diffs %s %v, without %s %v", previewRuns,
			with.Round(time.Millisecond), took["with"], without.Round(time.Millisecond), took["without"])
		b.ReportMetric(with.Seconds(), "s/preview-with-diffs")
		b.ReportMetric(without.Seconds(), "s/preview-without")
		b.ReportMetric(ratio, "x-without")
		b.StartTimer()
	}
}
