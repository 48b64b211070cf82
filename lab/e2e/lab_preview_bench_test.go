//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
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
