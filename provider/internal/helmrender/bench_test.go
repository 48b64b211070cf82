package helmrender_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
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

// renderOnce renders the chart of arg ({"Cache": <cache dir>, "Repo": <repository URL>}) once as
// a plan does on a render-cache miss (the archive from the warm cache).
func renderOnce(arg string) int {
	var job struct{ Cache, Repo string }
	if err := json.Unmarshal([]byte(arg), &job); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	r := &helmrender.Renderer{Cache: helmrender.NewCache(job.Cache), KubeVersion: kube}
	rel := cilium(job.Repo)

	// A plan-time render on a miss: the render and the determinism gate's second render at once.
	if err := os.RemoveAll(filepath.Join(job.Cache, "renders")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	if _, err := r.Render(context.Background(), rel); err != nil {
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

// idleRSS starts the plugin binary at path, waits for the port it prints on stdout (it is then
// serving, before any request) and returns its peak resident set size so far (VmHWM).
func idleRSS(path string) (int64, error) {
	var stderr bytes.Buffer

	cmd := exec.Command(path)
	cmd.Stderr = &stderr

	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}

	if err := cmd.Start(); err != nil {
		return 0, err
	}

	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	port := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(stdout).ReadString('\n')
		port <- err
	}()

	select {
	case err := <-port:
		if err != nil {
			return 0, fmt.Errorf("%s printed no port: %w\n%s", path, err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("%s printed no port in 30 s\n%s", path, stderr.String())
	}

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		return 0, err
	}

	for line := range strings.Lines(string(status)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kib, err := strconv.ParseInt(f[1], 10, 64)
			return kib << 10, err
		}
	}

	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", cmd.Process.Pid)
}

// cgoSetting is the CGO_ENABLED this test binary was built with ("0" when unknown).
func cgoSetting() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "CGO_ENABLED" {
				return s.Value
			}
		}
	}

	return "0"
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)

	return s[len(s)/2]
}

// BenchmarkHelmRender times, in one run and on one chart archive with the same values, what a
// plan pays for the Cilium release with the Talos preset: cold (render cache empty, chart archive
// cached: fetch + the render and, beside it, the determinism gate's second render of what can
// vary + normalise + store) and warm (a
// render-cache hit), against `helm template` of the helm v3.22.0 CLI built from its module. It also
// times one plain render pass, and measures each side's peak memory (max RSS of a process doing
// one cold render). Goals: cold ≤ 0.5, warm ≤ 0.05, peak RSS ≤ the CLI's.
func BenchmarkHelmRender(b *testing.B) {
	archive := helmtest.CiliumArchive(b)
	repo := helmtest.Repository(b, archive)
	dir := b.TempDir()
	ctx := context.Background()

	helm := filepath.Join(b.TempDir(), "helm")
	// The CLI is linked as this test binary is (`make bench` builds everything static, as Helm
	// releases its CLI and as the plugin is released): a cgo build of either side would add
	// 25–40 MiB of RSS that has nothing to do with rendering.
	build := exec.Command("go", "build", "-o", helm, "helm.sh/helm/v3/cmd/helm")
	build.Env = append(os.Environ(), "CGO_ENABLED="+cgoSetting())

	if out, err := build.CombinedOutput(); err != nil {
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

	var cold, hit, pass, tmpl []time.Duration

	timed := func(into *[]time.Duration, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}

		*into = append(*into, time.Since(start))
	}

	same := func(m *helmrender.Manifest, err error) error {
		if err == nil && m.Contents != warm.Contents {
			err = errors.New("the render differs from the first one")
		}

		return err
	}

	for b.Loop() {
		cold, hit, pass, tmpl = nil, nil, nil, nil

		for range rounds {
			if err := os.RemoveAll(filepath.Join(dir, "renders")); err != nil {
				b.Fatal(err)
			}

			timed(&cold, func() error { return same(r.Render(ctx, rel)) })
			timed(&hit, func() error { return same(r.Render(ctx, rel)) })
			timed(&pass, func() error {
				a, err := r.Fetch(ctx, rel.Source)
				if err != nil {
					return err
				}

				return same(helmrender.RenderArchive(ctx, a, rel, kube))
			})
			timed(&tmpl, func() error { return cli().Run() })
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

	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	ratio := func(d []time.Duration) float64 { return ms(median(d)) / ms(median(tmpl)) }

	b.ReportMetric(ms(median(cold)), "cold-ms")
	b.ReportMetric(ms(median(hit)), "warm-ms")
	b.ReportMetric(ms(median(pass)), "pass-ms")
	b.ReportMetric(ms(median(tmpl)), "helm-template-ms")

	fmt.Printf("helm render ratio cold: %.2f\n", ratio(cold))
	fmt.Printf("helm render ratio warm: %.3f\n", ratio(hit))
	fmt.Printf("helm peak rss MiB: %.0f cli %.0f\n", float64(childRSS)/(1<<20), float64(cliRSS)/(1<<20))
	// The plugin's own floor: the binary that renders at plan time (it also links Pulumi, Talos
	// machinery, etcd's and Kubernetes' clients for day 2), serving and idle.
	if plugin := os.Getenv("TALOS_PROXMOX_PLUGIN"); plugin != "" {
		idle, err := idleRSS(plugin)
		if err != nil {
			b.Fatalf("plugin idle RSS: %v", err)
		}

		fmt.Printf("plugin idle rss MiB: %.0f\n", float64(idle)/(1<<20))
	}

	fmt.Printf("helm render detail: medians of %d: cold %.1f ms (with the gate's second render), warm %.2f ms (cache hit), "+
		"one pass %.1f ms, helm template CLI %.1f ms; %d bytes, %d objects\n", rounds, ms(median(cold)), ms(median(hit)),
		ms(median(pass)), ms(median(tmpl)), len(warm.Contents), len(warm.Objects))
}
