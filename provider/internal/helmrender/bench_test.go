package helmrender_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// memoryChildEnv makes the test binary render Cilium once and exit (see TestMain): its peak RSS
// is the in-process render's peak memory, measured like the helm CLI's.
const memoryChildEnv = "HELMRENDER_BENCH_RENDER_ONCE"

func TestMain(m *testing.M) {
	if spec := os.Getenv(memoryChildEnv); spec != "" {
		os.Exit(renderOnce(spec))
	}

	os.Exit(m.Run())
}

// renderOnce renders the chart archive named in arg ("<cache dir>|<repository URL>") once,
// from the warm cache.
func renderOnce(arg string) int {
	var job struct{ Cache, Repo string }
	if err := json.Unmarshal([]byte(arg), &job); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	r := &helmrender.Renderer{Cache: helmrender.NewCache(job.Cache), KubeVersion: kube}
	rel := cilium(job.Repo)

	a, err := r.Fetch(context.Background(), rel.Source)
	if err == nil {
		_, err = helmrender.RenderArchive(context.Background(), a, rel, kube)
	}

	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	return 0
}

// peakRSS runs a command and returns its peak resident set size in bytes. Go starts children
// with vfork, and Linux then counts the parent's peak as the child's; a real fork from a small
// Python process gives the child's own.
func peakRSS(cmd *exec.Cmd) (int64, error) {
	const launcher = `import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
print(ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))`

	args := append([]string{"-c", launcher}, cmd.Args...)
	args[2] = cmd.Path

	py := exec.Command("python3", args...)
	py.Env, py.Stderr = cmd.Env, os.Stderr

	out, err := py.Output()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", cmd.Path, err)
	}

	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return 0, fmt.Errorf("%s: no peak RSS reported", cmd.Path)
	}

	kib, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)

	return kib << 10, err
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)

	return s[len(s)/2]
}

// BenchmarkHelmRender times, in one run and on one chart archive with the same values, one
// in-process render pass of Cilium with the Talos preset from a warm cache (fetch from cache +
// chart load + render + normalise), the determinism gate's second pass (load + render +
// normalise), and `helm template` of the helm v3.22.0 CLI built from its module. It prints the
// ratio in-process / CLI (goal ≤ 0.5) and each side's peak memory (max RSS of a process doing one
// render).
func BenchmarkHelmRender(b *testing.B) {
	archive := helmtest.CiliumArchive(b)
	repo := helmtest.Repository(b, archive)
	dir := b.TempDir()
	ctx := context.Background()

	helm := filepath.Join(b.TempDir(), "helm")
	if out, err := exec.Command("go", "build", "-o", helm, "helm.sh/helm/v3/cmd/helm").CombinedOutput(); err != nil {
		b.Fatalf("building the helm CLI: %v\n%s", err, out)
	}

	values := filepath.Join(b.TempDir(), "values.json")

	vj, err := json.Marshal(spec.CiliumPreset(3))
	if err != nil {
		b.Fatal(err)
	}

	if err := os.WriteFile(values, vj, 0o644); err != nil {
		b.Fatal(err)
	}

	r := &helmrender.Renderer{Cache: helmrender.NewCache(dir), KubeVersion: kube}
	rel := cilium(repo.URL)

	warm, err := r.Render(ctx, rel) // fills the cache
	if err != nil {
		b.Fatal(err)
	}

	cli := func() *exec.Cmd {
		cmd := exec.Command(helm, "template", "cilium", archive, "--namespace", "kube-system",
			"--kube-version", kube, "--include-crds", "--skip-tests", "-f", values)
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+b.TempDir(), "HELM_CONFIG_HOME="+b.TempDir())

		return cmd
	}

	const rounds = 15

	var inproc, gate, tmpl []time.Duration

	for b.Loop() {
		inproc, gate, tmpl = nil, nil, nil

		for range rounds {
			start := time.Now()

			a, err := r.Fetch(ctx, rel.Source)
			if err != nil {
				b.Fatal(err)
			}

			m, err := helmrender.RenderArchive(ctx, a, rel, kube)
			if err != nil || m.Contents != warm.Contents {
				b.Fatalf("in-process render: %v", err)
			}

			inproc = append(inproc, time.Since(start))

			start = time.Now()
			if _, err := helmrender.RenderArchive(ctx, a, rel, kube); err != nil {
				b.Fatal(err)
			}

			gate = append(gate, time.Since(start))

			start = time.Now()
			if err := cli().Run(); err != nil {
				b.Fatalf("helm template: %v", err)
			}

			tmpl = append(tmpl, time.Since(start))
		}
	}

	job, _ := json.Marshal(map[string]string{"Cache": dir, "Repo": repo.URL})
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), memoryChildEnv+"="+string(job))

	childRSS, err := peakRSS(child)
	if err != nil {
		b.Fatalf("in-process render child: %v", err)
	}

	cliRSS, err := peakRSS(cli())
	if err != nil {
		b.Fatal(err)
	}

	var before, after runtime.MemStats

	runtime.ReadMemStats(&before)

	a, err := r.Fetch(ctx, rel.Source)
	if err == nil {
		_, err = helmrender.RenderArchive(ctx, a, rel, kube)
	}

	runtime.ReadMemStats(&after)

	if err != nil {
		b.Fatal(err)
	}

	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	ratio := ms(median(inproc)) / ms(median(tmpl))

	b.ReportMetric(ms(median(inproc)), "inprocess-ms")
	b.ReportMetric(ms(median(gate)), "gate-pass-ms")
	b.ReportMetric(ms(median(tmpl)), "helm-template-ms")
	b.ReportMetric(ratio, "ratio")

	fmt.Printf("helm render ratio: %.2f (medians of %d: in-process %.1f ms, determinism gate's second pass %.1f ms, "+
		"helm template CLI %.1f ms; %d bytes, %d objects)\n", ratio, rounds, ms(median(inproc)), ms(median(gate)),
		ms(median(tmpl)), len(warm.Contents), len(warm.Objects))
	fmt.Printf("helm render peak memory: in-process %.0f MiB (peak RSS of this test binary rendering once; it "+
		"allocates %.0f MiB per pass), helm template %.0f MiB (peak RSS)\n", float64(childRSS)/(1<<20),
		float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), float64(cliRSS)/(1<<20))
}
