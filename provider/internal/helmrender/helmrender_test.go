package helmrender_test

import (
	"context"
	"strings"
	"testing"

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
