package helmrender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"
)

// Archive is a fetched chart: a packaged archive with its sha256, or an unpacked directory.
type Archive struct {
	Data   []byte
	Digest string // hex sha256 of Data
	Dir    string
}

// Load returns a fresh copy of the chart. Helm mutates a chart while rendering it (subcharts
// turned off by conditions are removed), so every render needs its own.
func (a *Archive) Load() (*chart.Chart, error) {
	if a.Dir != "" {
		return loader.LoadDir(a.Dir)
	}

	return loader.LoadArchive(bytes.NewReader(a.Data))
}

// loadTwice returns the chart and a loader of a copy that may be read while the chart renders.
// Rendering changes a chart only when it has dependencies (it drops disabled subcharts and
// imports their values); without any, the chart itself is that copy.
func (a *Archive) loadTwice() (*chart.Chart, func() (*chart.Chart, error), error) {
	var (
		ch    *chart.Chart
		again func() (*chart.Chart, error)
		err   error
	)

	if a.Dir != "" {
		again = func() (*chart.Chart, error) { return loader.LoadDir(a.Dir) }
		ch, err = again()
	} else {
		files, ferr := loader.LoadArchiveFiles(bytes.NewReader(a.Data))
		if ferr != nil {
			return nil, nil, ferr
		}

		again = func() (*chart.Chart, error) { return loader.LoadFiles(files) }
		ch, err = again()
	}

	if err != nil {
		return nil, nil, err
	}

	// Helm skips the dependency processing only when the list is nil; `dependencies: []` still
	// makes it replace the chart's dependencies and values.
	if ch.Metadata.Dependencies == nil && len(ch.Dependencies()) == 0 {
		return ch, func() (*chart.Chart, error) { return ch, nil }, nil
	}

	return ch, again, nil
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidDigest reports whether d is a digest pin this package accepts.
func ValidDigest(d string) bool { return digestRE.MatchString(d) }

// Fetch returns a source's chart, from the cache when it is there. A cache hit makes no
// network call. A pinned digest is checked against the archive's sha256.
func (r *Renderer) Fetch(ctx context.Context, s Source) (*Archive, error) {
	want := ""
	if s.Digest != "" {
		if !ValidDigest(s.Digest) {
			return nil, fmt.Errorf("digest %q is not of the form sha256:<64 lower-case hex digits>", s.Digest)
		}

		want = strings.TrimPrefix(s.Digest, "sha256:")
	}

	if s.IsLocal() {
		return r.fetchLocal(s, want)
	}

	if s.Version == "" {
		return nil, fmt.Errorf("chart %s has no version; pin one so every render uses the same chart", s)
	}

	if r.Cache != nil {
		unlock := r.Cache.lock(refKey(s))
		defer unlock()

		if want != "" {
			if data, ok := r.Cache.Blob(want); ok {
				return &Archive{Data: data, Digest: want}, nil
			}
		} else if data, d, ok := r.Cache.Lookup(s); ok {
			return &Archive{Data: data, Digest: d}, nil
		}
	}

	var (
		data []byte
		err  error
	)

	if strings.HasPrefix(s.Repository, "oci://") {
		data, err = r.fetchOCI(s)
	} else {
		data, err = r.fetchHTTP(ctx, s)
	}

	if err != nil {
		return nil, err
	}

	d := digestOf(data)
	if want != "" && d != want {
		return nil, fmt.Errorf("chart %s: the archive's digest is sha256:%s but digest pins sha256:%s; "+
			"the repository serves a different archive than the one pinned (re-published or tampered with); "+
			"check it, then update digest", s, d, want)
	}

	if r.Cache != nil {
		if _, err := r.Cache.Store(s, data); err != nil {
			return nil, err
		}
	}

	return &Archive{Data: data, Digest: d}, nil
}

func (r *Renderer) fetchLocal(s Source, want string) (*Archive, error) {
	p := s.Chart
	if !filepath.IsAbs(p) {
		base := r.WorkDir
		if base == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, err
			}

			base = wd
		}

		p = filepath.Join(base, p)
	}

	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("local chart %s not found (relative paths are relative to the program's "+
			"directory); for a chart from a repository, also set repository", p)
	}

	if st.IsDir() {
		if want != "" {
			return nil, fmt.Errorf("digest pins an archive, but chart %s is a directory; pin a packaged chart "+
				"(`helm package %s`) or remove digest", p, p)
		}

		return &Archive{Dir: p}, nil
	}

	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}

	d := digestOf(data)
	if want != "" && d != want {
		return nil, fmt.Errorf("chart %s: the archive's digest is sha256:%s but digest pins sha256:%s", p, d, want)
	}

	return &Archive{Data: data, Digest: d}, nil
}

func (r *Renderer) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}

	resp, err := r.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()

	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", redact(u), resp.Status)
	}

	return io.ReadAll(resp.Body)
}

func (r *Renderer) fetchHTTP(ctx context.Context, s Source) ([]byte, error) {
	base := strings.TrimSuffix(s.Repository, "/")

	body, err := r.get(ctx, base+"/index.yaml")
	if err != nil {
		return nil, fmt.Errorf("chart %s: cannot read the index of chart repository %s: %w; check repository "+
			"and that this machine can reach it", s.Chart, redact(s.Repository), err)
	}

	var idx repo.IndexFile
	if err := yaml.Unmarshal(body, &idx); err != nil || idx.Entries == nil {
		if err == nil {
			err = errors.New("no entries")
		}

		return nil, fmt.Errorf("chart %s: %s is not a Helm chart repository: index.yaml: %w", s.Chart,
			redact(s.Repository), err)
	}

	idx.SortEntries()

	versions, ok := idx.Entries[s.Chart]
	if !ok {
		return nil, fmt.Errorf("chart %q not found in repository %s (it has %s); check chart", s.Chart,
			redact(s.Repository), list(slices.Sorted(maps.Keys(idx.Entries)), 20))
	}

	var cv *repo.ChartVersion

	for _, v := range versions {
		if v != nil && strings.TrimPrefix(v.Version, "v") == strings.TrimPrefix(s.Version, "v") {
			cv = v
			break
		}
	}

	if cv == nil {
		var have []string
		for _, v := range versions {
			if v != nil {
				have = append(have, v.Version)
			}
		}

		return nil, fmt.Errorf("version %q of chart %q not found in repository %s (newest first: %s); check version",
			s.Version, s.Chart, redact(s.Repository), list(have, 10))
	}

	if len(cv.URLs) == 0 {
		return nil, fmt.Errorf("chart %s: the repository index lists no download URL", s)
	}

	u, err := repo.ResolveReferenceURL(base+"/", cv.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("chart %s: bad URL %q in the repository index: %w", s, cv.URLs[0], err)
	}

	data, err := r.get(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("cannot download chart %s: %w", s, err)
	}

	if d := strings.ToLower(strings.TrimPrefix(cv.Digest, "sha256:")); d != "" && d != digestOf(data) {
		return nil, fmt.Errorf("chart %s: the archive's digest is sha256:%s but the repository index says "+
			"sha256:%s; the download is corrupt or the repository inconsistent", s, digestOf(data), cv.Digest)
	}

	return data, nil
}

func (r *Renderer) fetchOCI(s Source) ([]byte, error) {
	path := strings.TrimSuffix(strings.TrimPrefix(s.Repository, "oci://"), "/")

	opts := []registry.ClientOption{registry.ClientOptHTTPClient(r.client()), registry.ClientOptEnableCache(true)}
	if host := strings.SplitN(path, "/", 2)[0]; isLoopback(host) {
		// Like Docker and containerd, a registry on this machine may speak plain HTTP.
		opts = append(opts, registry.ClientOptPlainHTTP())
	}

	rc, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("OCI registry client: %w", err)
	}

	// OCI tags cannot hold '+'; Helm stores build metadata with '_' instead.
	ref := path + "/" + s.Chart + ":" + strings.ReplaceAll(s.Version, "+", "_")

	res, err := rc.Pull(ref)
	if err != nil {
		return nil, fmt.Errorf("cannot pull chart %s (oci://%s): %w; check repository, chart and version, "+
			"and that this machine can reach the registry", s, ref, err)
	}

	if res.Chart == nil || len(res.Chart.Data) == 0 {
		return nil, fmt.Errorf("oci://%s holds no Helm chart", ref)
	}

	return res.Chart.Data, nil
}

func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}

	if host == "localhost" {
		return true
	}

	ip := net.ParseIP(host)

	return ip != nil && ip.IsLoopback()
}

// redact drops credentials from a URL before it goes into an error message.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}

	p.User = nil

	return p.String()
}

func list(items []string, max int) string {
	if len(items) == 0 {
		return "none"
	}

	if len(items) > max {
		return strings.Join(items[:max], ", ") + fmt.Sprintf(" and %d more", len(items)-max)
	}

	return strings.Join(items, ", ")
}
