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
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

const kube = "v1.34.1"

// cilium is the release the component makes of the `cilium` input of a three control plane
// cluster, from the given repository.
func cilium(repo string) helmrender.Release {
	return helmrender.Release{
		Path: "cilium", Name: "cilium", Namespace: "kube-system", IncludeCRDs: true, Hint: spec.CiliumHint,
		Source: helmrender.Source{Chart: "cilium", Repository: repo, Version: helmtest.CiliumVersion},
		Values: spec.CiliumPreset(3),
	}
}

func renderer(t *testing.T) *helmrender.Renderer {
	return &helmrender.Renderer{Cache: helmrender.NewCache(t.TempDir()), KubeVersion: kube}
}

func objectList(m *helmrender.Manifest) string {
	var b strings.Builder
	for _, o := range m.Objects {
		b.WriteString(o.APIVersion + " " + o.String() + "\n")
	}

	return b.String()
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()

	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}

	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

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
	repo.Close()

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
	repo.Close()

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

// TestDeterminismGate: Cilium's chart defaults generate a CA on every render and are refused,
// naming the objects and the fix; the Talos preset renders the same bytes every time.
func TestDeterminismGate(t *testing.T) {
	t.Parallel()

	archive := helmtest.CiliumArchive(t)

	rel := cilium("")
	rel.Source = helmrender.Source{Chart: archive}
	rel.Values = nil

	_, err := renderer(t).Render(context.Background(), rel)
	wantErr(t, err, "cilium: chart cilium 1.18.0 renders differently every time",
		"Secret kube-system/cilium-ca", "Secret kube-system/hubble-server-certs", "hubble.tls.auto.method=cronJob")

	rel.Values = spec.CiliumPreset(1)

	a, err := renderer(t).Render(context.Background(), rel)
	if err != nil {
		t.Fatal(err)
	}

	b, err := renderer(t).Render(context.Background(), rel)
	if err != nil || a.Contents != b.Contents {
		t.Fatalf("two renderers gave different output (%v)", err)
	}

	if !strings.Contains(a.Contents, "replicas: 1") {
		t.Error("a single control plane should get one operator replica")
	}
}

func TestKubeVersion(t *testing.T) {
	t.Parallel()

	archive := helmtest.CiliumArchive(t)
	rel := cilium("")
	rel.Source = helmrender.Source{Chart: archive}

	render := func(kv string) (*helmrender.Manifest, error) {
		r := &helmrender.Renderer{KubeVersion: kv}
		return r.Render(context.Background(), rel)
	}

	old, err := render("v1.29.0")
	if err != nil {
		t.Fatal(err)
	}

	cur, err := render(kube)
	if err != nil {
		t.Fatal(err)
	}

	// Cilium annotates pods with AppArmor profiles only below Kubernetes 1.30.
	if !strings.Contains(old.Contents, "container.apparmor.security.beta.kubernetes.io") ||
		strings.Contains(cur.Contents, "container.apparmor.security.beta.kubernetes.io") {
		t.Error("the Kubernetes version does not reach the templates")
	}

	_, err = render("v1.20.0")
	wantErr(t, err, "cilium: rendering chart cilium 1.18.0 failed", "kubeVersion")
}

// TestNamespace renders Cilium into its own namespace: the namespace is created first and every
// namespaced object is in it.
func TestNamespace(t *testing.T) {
	t.Parallel()

	rel := cilium("")
	rel.Source = helmrender.Source{Chart: helmtest.CiliumArchive(t)}
	rel.Namespace = "networking"

	m, err := renderer(t).Render(context.Background(), rel)
	if err != nil {
		t.Fatal(err)
	}

	if first := m.Objects[0]; first.Kind != "Namespace" || first.Name != "networking" {
		t.Errorf("first object = %s, want Namespace networking", first)
	}

	for _, o := range m.Objects[1:] {
		switch o.Kind {
		case "Namespace", "ClusterRole", "ClusterRoleBinding":
		default:
			if o.Namespace != "networking" && o.Namespace != "cilium-secrets" {
				t.Errorf("%s is not in the release namespace", o)
			}
		}
	}
}

func TestNormaliseAddsMissingNamespaces(t *testing.T) {
	t.Parallel()

	stream := `---
# Source: x/templates/sa.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: app
  labels: {a: b}
---
# Source: x/templates/empty.yaml
# only a comment
---
# Source: x/templates/crd.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  scope: Cluster
  names: {kind: Widget}
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: r
---
apiVersion: example.com/v1
kind: Gadget
metadata:
  name: g
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: empty-namespace
  namespace: ""
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: null-namespace
  namespace: null
---
apiVersion: v1
kind: ConfigMapList
items:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: listed}
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    metadata: {name: listed-role}
`

	m, err := helmrender.Normalise(stream, "apps")
	if err != nil {
		t.Fatal(err)
	}

	golden.Check(t, "normalised.yaml", m.Contents)

	var got []string
	for _, o := range m.Objects {
		got = append(got, o.String())
	}

	want := "Namespace apps,ServiceAccount apps/app,CustomResourceDefinition widgets.example.com,Widget w,ClusterRole r,Gadget apps/g," +
		"ConfigMap apps/empty-namespace,ConfigMap apps/null-namespace,ConfigMapList "
	if strings.Join(got, ",") != want {
		t.Errorf("objects = %s\nwant      %s", strings.Join(got, ","), want)
	}

	if _, err := helmrender.Normalise("apiVersion: v1\nkind: [\n", "x"); err == nil {
		t.Error("invalid YAML accepted")
	}

	if _, err := helmrender.Normalise("- a\n- b\n", "x"); err == nil {
		t.Error("a list document accepted as an object")
	}
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
	dead.Close()
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
