package helmrender_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/golden"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
)

// TestCiliumFromHTTPRepository renders Cilium with the Talos preset from a classic chart
// repository: the objects match the golden list, the Talos values are in the output, and a second
// render from the cache works with the repository gone.
func TestCiliumFromHTTPRepository(t *testing.T) {
	t.Parallel()

	repo := helmtest.Repository(t, helmtest.CiliumArchive(t))
	r := renderer(t)

	m, err := r.Render(context.Background(), cilium(repo.URL))
	if err != nil {
		t.Fatal(err)
	}

	golden.Check(t, "cilium-objects.txt", objectList(m))

	for _, want := range []string{
		"kube-proxy-replacement: \"true\"", "ipam: \"kubernetes\"", "KUBERNETES_SERVICE_HOST\n          value: \"localhost\"",
		"value: \"7445\"", "SYS_RESOURCE", "name: hubble-generate-certs", "replicas: 2",
	} {
		if !strings.Contains(m.Contents, want) {
			t.Errorf("rendered Cilium lacks %q", want)
		}
	}

	if strings.Contains(m.Contents, "# Source:") || strings.Contains(m.Contents, "SYS_MODULE") {
		t.Error("rendered Cilium keeps Helm's # Source lines or the SYS_MODULE capability")
	}

	if m.Digest == "" || m.Chart != "cilium" || m.ChartVersion != helmtest.CiliumVersion {
		t.Errorf("manifest = %s %s %s", m.Chart, m.ChartVersion, m.Digest)
	}

	before := repo.Requests()
	_ = repo.Close()

	again, err := r.Render(context.Background(), cilium(repo.URL))
	if err != nil {
		t.Fatalf("cache hit with the repository stopped: %v", err)
	}

	if again.Contents != m.Contents || repo.Requests() != before {
		t.Errorf("cache hit made %d requests or rendered differently", repo.Requests()-before)
	}

	// A new renderer (a new process) on the same cache directory also needs no network.
	fresh := &helmrender.Renderer{Cache: helmrender.NewCache(r.Cache.Dir), KubeVersion: kube}
	if _, err := fresh.Render(context.Background(), cilium(repo.URL)); err != nil {
		t.Fatalf("cache hit from a new renderer: %v", err)
	}
}

// TestCiliumFromOCIRegistry pulls the same archive from an OCI registry and renders the same
// bytes as from the HTTP repository.
func TestCiliumFromOCIRegistry(t *testing.T) {
	t.Parallel()

	archive := helmtest.CiliumArchive(t)
	reg := helmtest.Registry(t, archive)
	repo := helmtest.Repository(t, archive)

	fromOCI, err := renderer(t).Render(context.Background(), cilium(reg.URL))
	if err != nil {
		t.Fatal(err)
	}

	fromHTTP, err := renderer(t).Render(context.Background(), cilium(repo.URL))
	if err != nil {
		t.Fatal(err)
	}

	if fromOCI.Contents != fromHTTP.Contents || fromOCI.Digest != fromHTTP.Digest {
		t.Error("the OCI and HTTP renders of one archive differ")
	}

	if reg.Requests() == 0 {
		t.Error("the registry was not asked")
	}

	r := renderer(t)
	rel := cilium(reg.URL)
	rel.Source.Version = "1.17.0"
	_, err = r.Render(context.Background(), rel)
	wantErr(t, err, "cilium: cannot pull chart cilium 1.17.0", "check repository, chart and version")
}

func TestDigestPin(t *testing.T) {
	t.Parallel()

	archive := helmtest.CiliumArchive(t)
	repo := helmtest.Repository(t, archive)

	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}

	actual := "sha256:" + sha256hex(data)
	wrong := "sha256:" + strings.Repeat("ab", 32)

	rel := cilium(repo.URL)
	rel.Source.Digest = wrong
	_, err = renderer(t).Render(context.Background(), rel)
	wantErr(t, err, "cilium: chart cilium 1.18.0 from "+repo.URL, "digest is "+actual, "digest pins "+wrong)

	r := renderer(t)
	rel.Source.Digest = actual

	if _, err := r.Render(context.Background(), rel); err != nil {
		t.Fatal(err)
	}

	// A pinned archive found in the cache needs no index and no network.
	_ = repo.Close()

	if _, err := r.Render(context.Background(), rel); err != nil {
		t.Fatalf("pinned cache hit: %v", err)
	}

	// A pin found in the cache must still be the chart asked for.
	other := rel
	other.Source.Chart = "cilium-fork"
	_, err = r.Render(context.Background(), other)
	wantErr(t, err, "cilium: chart cilium-fork 1.18.0", `the archive holds chart "cilium"`)

	// The same pin on a local archive.
	local := rel
	local.Source = helmrender.Source{Chart: archive, Digest: wrong}
	_, err = r.Render(context.Background(), local)
	wantErr(t, err, "digest is "+actual, "digest pins "+wrong)
}

func TestBadSources(t *testing.T) {
	t.Parallel()

	repo := helmtest.Repository(t, helmtest.CiliumArchive(t))
	ctx := context.Background()

	rel := cilium(repo.URL)
	rel.Source.Chart = "ciliun"
	_, err := renderer(t).Render(ctx, rel)
	wantErr(t, err, `cilium: chart "ciliun" not found in repository `+repo.URL, "it has cilium", "check chart")

	rel = cilium(repo.URL)
	rel.Source.Version = "1.99.0"
	_, err = renderer(t).Render(ctx, rel)
	wantErr(t, err, `version "1.99.0" of chart "cilium" not found`, "newest first: 1.18.0")

	rel = cilium(repo.URL + "/nowhere")
	_, err = renderer(t).Render(ctx, rel)
	wantErr(t, err, "chart cilium: cannot read the index of chart repository", "404")

	dead := helmtest.Repository(t)
	_ = dead.Close()
	_, err = renderer(t).Render(ctx, cilium(dead.URL))
	wantErr(t, err, "cannot read the index of chart repository "+dead.URL, "dial tcp", "can reach it")

	rel = cilium("")
	rel.Source = helmrender.Source{Chart: "no/such/chart"}
	_, err = renderer(t).Render(ctx, rel)
	wantErr(t, err, "local chart", "no/such/chart not found")

	rel = cilium("")
	rel.Source = helmrender.Source{Chart: helmtest.CiliumArchive(t), Version: "1.17.0"}
	_, err = renderer(t).Render(ctx, rel)
	wantErr(t, err, "is version 1.18.0, not 1.17.0")

	// Values the chart's schema refuses.
	rel = cilium("")
	rel.Source = helmrender.Source{Chart: helmtest.CiliumArchive(t)}
	rel.Values = map[string]any{"kubeProxyReplacement": map[string]any{"x": 1.0}}
	_, err = renderer(t).Render(ctx, rel)
	wantErr(t, err, "cilium: rendering chart cilium 1.18.0 failed", "kubeProxyReplacement", "check values")
}

// TestLocalChart renders an unpacked chart directory, by a path relative to the work directory.
func TestLocalChart(t *testing.T) {
	t.Parallel()

	dir := helmtest.CiliumChartDir(t)
	r := &helmrender.Renderer{KubeVersion: kube, WorkDir: filepath.Dir(dir)}

	rel := cilium("")
	rel.Source = helmrender.Source{Chart: filepath.Base(dir)}

	m, err := r.Render(context.Background(), rel)
	if err != nil {
		t.Fatal(err)
	}

	if m.Digest != "" || len(m.Objects) == 0 {
		t.Errorf("directory render: digest %q, %d objects", m.Digest, len(m.Objects))
	}

	rel.Source.Digest = "sha256:" + strings.Repeat("0", 64)
	_, err = r.Render(context.Background(), rel)
	wantErr(t, err, "is a directory", "helm package")
}

// TestConcurrentRendersShareTheCache: several renderers (as separate processes would) fetch into
// one cache directory at once; all succeed with the same bytes and the cache holds one blob.
func TestConcurrentRendersShareTheCache(t *testing.T) {
	t.Parallel()

	repo := helmtest.Repository(t, helmtest.CiliumArchive(t))
	dir := t.TempDir()

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		outs = map[string]int{}
	)

	for range 4 {
		wg.Go(func() {
			r := &helmrender.Renderer{Cache: helmrender.NewCache(dir), KubeVersion: kube}

			m, err := r.Render(context.Background(), cilium(repo.URL))
			if err != nil {
				t.Error(err)
				return
			}

			mu.Lock()
			outs[m.Contents]++
			mu.Unlock()
		})
	}

	wg.Wait()

	if len(outs) != 1 {
		t.Errorf("%d different outputs", len(outs))
	}

	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
	if len(blobs) != 1 {
		t.Errorf("cache holds %v, want one blob", blobs)
	}
}

func sha256hex(data []byte) string {
	sum := sha256.Sum256(data)

	return hex.EncodeToString(sum[:])
}
