package helmrender

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// renderFormat versions what a cached render holds and how it was normalised: bump it whenever
// Normalise or the Manifest fields change, so older entries are never read.
const renderFormat = "1"

// MaxCachedRenders bounds the render cache: storing a render removes the least recently used
// entries beyond it.
var MaxCachedRenders = 128

// helmVersion is the Helm library this binary renders with (its module version).
var helmVersion = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "helm.sh/helm/v3" {
				return m.Version
			}
		}
	}

	return "unknown"
})

// renderKey identifies a render by everything that can change its output or whether it is
// accepted: the chart archive's digest, the chart and version asked for (RenderArchive checks the
// archive holds them), the values (canonical JSON: sorted keys), the release name and namespace, whether CRDs
// are included, the Kubernetes version, the Helm library version and the normalisation format.
// An unpacked local chart directory has no digest and is never cached.
func renderKey(a *Archive, rel Release, kubeVersion string) (string, bool) {
	if a.Digest == "" {
		return "", false
	}

	values, err := json.Marshal(rel.Values)
	if err != nil {
		return "", false
	}

	h := sha256.New()
	for _, part := range []string{
		renderFormat, helmVersion(), a.Digest, rel.Source.Chart, rel.Source.Version, rel.Name, rel.Namespace, kubeVersion,
		strconv.FormatBool(rel.IncludeCRDs), string(values),
	} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}

	return hex.EncodeToString(h.Sum(nil)), true
}

// cachedRender is one entry: the manifest and the sha256 of its encoding, checked on every read.
type cachedRender struct {
	Sum      string          `json:"sum"`
	Manifest json.RawMessage `json:"manifest"`
}

func (c *Cache) renderPath(key string) string { return filepath.Join(c.Dir, "renders", key) }

// loadRender returns the cached render of key, if there is one and it is intact (its sum
// matches); a hit marks the entry as recently used.
func (c *Cache) loadRender(key string) (*Manifest, bool) {
	path := c.renderPath(key)

	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}

	var entry cachedRender
	if json.Unmarshal(data, &entry) != nil || digestOf(entry.Manifest) != entry.Sum {
		return nil, false
	}

	var m Manifest
	if json.Unmarshal(entry.Manifest, &m) != nil {
		return nil, false
	}

	now := time.Now()
	_ = os.Chtimes(path, now, now)

	return &m, true
}

// storeRender writes the render of key (atomically: a concurrent reader sees the old entry or
// the new one) and trims the cache to MaxCachedRenders entries, least recently used first.
func (c *Cache) storeRender(key string, m *Manifest) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}

	data, err := json.Marshal(cachedRender{Sum: digestOf(body), Manifest: body})
	if err != nil {
		return err
	}

	if err := writeAtomic(c.renderPath(key), data); err != nil {
		return err
	}

	c.trimRenders()

	return nil
}

func (c *Cache) trimRenders() {
	dir := filepath.Join(c.Dir, "renders")

	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) <= MaxCachedRenders {
		return
	}

	type aged struct {
		name string
		at   time.Time
	}

	var all []aged

	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			continue // another writer's entry, not renamed into place yet
		}

		if info, err := e.Info(); err == nil && e.Type().IsRegular() {
			all = append(all, aged{e.Name(), info.ModTime()})
		}
	}

	slices.SortFunc(all, func(a, b aged) int { return b.at.Compare(a.at) })

	for _, e := range all[min(MaxCachedRenders, len(all)):] {
		_ = os.Remove(filepath.Join(dir, e.name))
	}
}
