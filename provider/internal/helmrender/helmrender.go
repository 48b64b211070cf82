// Package helmrender renders Helm charts in-process, the way `helm template` does, into the
// YAML streams Talos applies as inline manifests at bootstrap.
//
// A chart comes from a classic HTTP repository (index.yaml), an OCI registry (oci://), a local
// directory or a local .tgz. Remote archives are kept in a content-addressed cache, so a second
// render makes no network call. Every render is done twice and compared: a chart that generates
// random values (certificates, passwords) would change the machine configuration on every
// `pulumi up`, so such a chart is refused with the objects that differ.
//
// The package imports no Pulumi package; errors name the property path of the release.
package helmrender

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Source locates a chart.
type Source struct {
	// Chart is the chart's name in its repository, or a local directory or .tgz path when
	// Repository is empty.
	Chart string
	// Repository is an http(s):// chart repository (with an index.yaml) or an oci:// registry
	// path. Empty means Chart is a local path.
	Repository string
	// Version is the exact chart version. Required for remote charts.
	Version string
	// Digest optionally pins the chart archive: "sha256:<64 hex digits>".
	Digest string
}

// IsLocal reports whether the chart is read from the file system.
func (s Source) IsLocal() bool { return s.Repository == "" }

func (s Source) String() string {
	switch {
	case s.IsLocal():
		return s.Chart
	case s.Version != "":
		return fmt.Sprintf("%s %s from %s", s.Chart, s.Version, s.Repository)
	default:
		return fmt.Sprintf("%s from %s", s.Chart, s.Repository)
	}
}

// ManifestPrefix starts the name of every inline manifest that holds a rendered release; the
// names are reserved for the component.
const ManifestPrefix = "helm-"

// ManifestName is the inline manifest name of a release: `helm-<release>`.
func ManifestName(release string) string { return ManifestPrefix + release }

// Release is one chart to render.
type Release struct {
	// Path is the property path of the release in the component's inputs, e.g.
	// `helmCharts[1]`; every error starts with it.
	Path        string
	Name        string
	Namespace   string
	Source      Source
	Values      map[string]any
	IncludeCRDs bool
	// Hint is appended to the determinism gate's error: how to make this chart render the same
	// bytes twice.
	Hint string
}

// Object identifies one rendered Kubernetes object.
type Object struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}

	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Manifest is a rendered release.
type Manifest struct {
	Release   string
	Namespace string
	// Contents is the normalised YAML stream: documents separated by `---`, no `# Source:` lines,
	// every namespaced object with its namespace, the release namespace created first when needed.
	Contents string
	Objects  []Object
	// Chart, ChartVersion and Digest describe the archive rendered; Digest is empty for an
	// unpacked local directory.
	Chart        string
	ChartVersion string
	Digest       string
}

// Renderer fetches and renders charts.
type Renderer struct {
	// Cache keeps remote chart archives; nil disables caching.
	Cache *Cache
	// HTTPClient fetches repository indexes, archives and OCI blobs. Default: a client with a
	// two-minute timeout.
	HTTPClient *http.Client
	// WorkDir is the base of relative local chart paths. Default: the process's directory.
	WorkDir string
	// KubeVersion is the cluster's Kubernetes version (e.g. v1.34.1). Required: Helm's library
	// default (v1.20) is older than most charts accept.
	KubeVersion string

	passes, hits atomic.Int64
}

func (r *Renderer) client() *http.Client {
	if r.HTTPClient != nil {
		return r.HTTPClient
	}

	return &http.Client{Timeout: 2 * time.Minute}
}

// Render fetches a release's chart and renders it, or takes the render from the cache when
// everything that can change it is unchanged (see renderKey). A render passes the determinism
// gate before it is used or cached: the templates whose output can differ between two renders
// (see varyingTemplates) are rendered a second time, beside the render, and output that differs
// is refused.
func (r *Renderer) Render(ctx context.Context, rel Release) (*Manifest, error) {
	a, err := r.Fetch(ctx, rel.Source)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel.Path, err)
	}

	key, cacheable := "", false
	if r.Cache != nil {
		key, cacheable = renderKey(a, rel, r.KubeVersion)
	}

	if cacheable {
		if m, ok := r.Cache.loadRender(key); ok {
			r.hits.Add(1)

			return m, nil
		}
	}

	ch, second, kv, err := loadFor(a, rel, r.KubeVersion)
	if err != nil {
		return nil, err
	}

	var (
		again gatePass
		wg    sync.WaitGroup
	)

	wg.Go(func() { again = renderAgain(ctx, second, rel, kv) })

	out, err := install(ctx, ch, rel, kv, second)

	wg.Wait()
	r.passes.Add(1 + again.passes)

	if err != nil {
		return nil, err
	}

	first, err := manifestOf(out, a, rel, ch)
	if err != nil {
		return nil, err
	}

	if again.err != nil {
		return nil, again.err
	}

	if err := again.check(rel, ch, bySource(out)); err != nil {
		return nil, err
	}

	if cacheable {
		_ = r.Cache.storeRender(key, first) // a cache that cannot be written only costs the next render
	}

	return first, nil
}

// Passes is how many render passes this renderer ran: one per render, and one more when the
// chart has templates the determinism gate renders again.
func (r *Renderer) Passes() int64 { return r.passes.Load() }

// Hits is how many renders came from the cache.
func (r *Renderer) Hits() int64 { return r.hits.Load() }

// RenderAll renders every release, several at once (at most GOMAXPROCS), returning them in order.
// It does not stop at a failed release: the error joins one error per failed release (each naming
// its property path), and the manifests of the releases that rendered are returned either way, in
// order.
func (r *Renderer) RenderAll(ctx context.Context, rels []Release) ([]*Manifest, error) {
	ms := make([]*Manifest, len(rels))
	errs := make([]error, len(rels))
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))

	var wg sync.WaitGroup

	for i, rel := range rels {
		slots <- struct{}{}

		wg.Go(func() {
			defer func() { <-slots }()

			ms[i], errs[i] = r.Render(ctx, rel)
		})
	}

	wg.Wait()

	out := make([]*Manifest, 0, len(rels))

	for _, m := range ms {
		if m != nil {
			out = append(out, m)
		}
	}

	return out, errors.Join(errs...)
}

// FetchAll fetches every release's chart without rendering it (when no Kubernetes version is
// known to render for), so a missing chart or a wrong digest is still reported. Like RenderAll it
// does not stop at a failed release; each error names the release's property path.
func (r *Renderer) FetchAll(ctx context.Context, rels []Release) error {
	var errs []error

	for _, rel := range rels {
		if _, err := r.Fetch(ctx, rel.Source); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rel.Path, err))
		}
	}

	return errors.Join(errs...)
}
