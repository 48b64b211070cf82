package helmrender_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// A render is cached by everything that can change it: a second renderer on the same cache makes
// no render pass, and a changed value, chart archive (digest) or Kubernetes version misses. A
// damaged entry is not trusted.
func TestRenderCache(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	archive := helmtest.CiliumArchive(t)

	rel := cilium("")
	rel.Source = helmrender.Source{Chart: archive}
	rel.Values = spec.CiliumPreset(1)

	render := func(rel helmrender.Release, kube string) (*helmrender.Manifest, *helmrender.Renderer) {
		t.Helper()

		r := &helmrender.Renderer{Cache: helmrender.NewCache(dir), KubeVersion: kube}

		m, err := r.Render(context.Background(), rel)
		if err != nil {
			t.Fatal(err)
		}

		return m, r
	}

	want, r := render(rel, kube)
	if r.Passes() != 2 || r.Hits() != 0 {
		t.Fatalf("a cold render ran %d passes with %d hits, want 2 and 0", r.Passes(), r.Hits())
	}

	got, r := render(rel, kube)
	if r.Passes() != 0 || r.Hits() != 1 {
		t.Errorf("an unchanged render ran %d passes with %d hits, want 0 and 1", r.Passes(), r.Hits())
	}

	if got.Contents != want.Contents || got.Digest != want.Digest || len(got.Objects) != len(want.Objects) {
		t.Error("the cached render differs from the render")
	}

	changedValue := rel
	changedValue.Values = spec.CiliumPreset(1)
	changedValue.Values["debug"] = map[string]any{"enabled": true}

	// The same chart in another archive: gzip's header time differs, so does the digest.
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}

	data[4]++
	other := filepath.Join(t.TempDir(), "cilium.tgz")
	if err := os.WriteFile(other, data, 0o644); err != nil {
		t.Fatal(err)
	}

	changedChart := rel
	changedChart.Source = helmrender.Source{Chart: other}

	for name, tc := range map[string]struct {
		rel  helmrender.Release
		kube string
	}{
		"a changed value": {changedValue, kube}, "another chart digest": {changedChart, kube}, "another Kubernetes version": {rel, "v1.33.5"},
	} {
		if _, r := render(tc.rel, tc.kube); r.Passes() != 2 || r.Hits() != 0 {
			t.Errorf("%s: %d passes, %d hits; want a render (2 passes, 0 hits)", name, r.Passes(), r.Hits())
		}
	}

	// Damage every entry: each is rendered again, with the right output.
	entries, err := filepath.Glob(filepath.Join(dir, "renders", "*"))
	if err != nil || len(entries) != 4 {
		t.Fatalf("%d cache entries (%v), want 4", len(entries), err)
	}

	for _, e := range entries {
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}

		b[len(b)/2] ^= 1
		if err := os.WriteFile(e, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	got, r = render(rel, kube)
	if r.Passes() != 2 || got.Contents != want.Contents {
		t.Errorf("a damaged entry was trusted (%d passes) or the render changed", r.Passes())
	}
}

// Several releases render at once and come back in order; a failed one does not stop the others.
func TestRenderAllInOrder(t *testing.T) {
	t.Parallel()

	archive := helmtest.CiliumArchive(t)

	var rels []helmrender.Release

	for i, name := range []string{"one", "two", "broken", "three"} {
		rel := cilium("")
		rel.Path, rel.Name = "helmCharts["+string(rune('0'+i))+"]", name
		rel.Source = helmrender.Source{Chart: archive}
		rel.Values = spec.CiliumPreset(1)

		if name == "broken" {
			rel.Values["operator"] = "not a map"
		}

		rels = append(rels, rel)
	}

	ms, err := renderer(t).RenderAll(context.Background(), rels)
	wantErr(t, err, "helmCharts[2]")

	if len(ms) != 3 || ms[0].Release != "one" || ms[1].Release != "two" || ms[2].Release != "three" {
		t.Errorf("got %d manifests, want one, two, three in order", len(ms))
	}
}
