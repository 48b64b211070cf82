package helmrender

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// CacheEnv overrides the default cache directory.
const CacheEnv = "TALOS_PROXMOX_HELM_CACHE"

// DefaultCacheDir is $TALOS_PROXMOX_HELM_CACHE, else <user cache dir>/pulumi-talos-proxmox/helm.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}

	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for Helm charts (set %s): %w", CacheEnv, err)
	}

	return filepath.Join(base, "pulumi-talos-proxmox", "helm"), nil
}

// Cache is a content-addressed store of chart archives:
//
//	<dir>/blobs/sha256/<hex>   the archive, named by its sha256
//	<dir>/refs/<hex>           the sha256 of the archive a (repository, chart, version) resolved to
//
// Files are written to a temporary name and renamed, so readers never see a partial file and
// concurrent writers (goroutines or processes) of the same content are harmless. A blob whose
// content does not match its name is treated as missing.
type Cache struct {
	Dir string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// NewCache returns a cache rooted at dir.
func NewCache(dir string) *Cache { return &Cache{Dir: dir} }

// lock serialises fetches of one key in this process, so concurrent renders of the same chart
// download it once.
func (c *Cache) lock(key string) func() {
	c.mu.Lock()
	if c.locks == nil {
		c.locks = map[string]*sync.Mutex{}
	}

	l, ok := c.locks[key]
	if !ok {
		l = &sync.Mutex{}
		c.locks[key] = l
	}
	c.mu.Unlock()

	l.Lock()

	return l.Unlock
}

func refKey(s Source) string {
	sum := sha256.Sum256([]byte(s.Repository + "\x00" + s.Chart + "\x00" + s.Version))

	return hex.EncodeToString(sum[:])
}

func (c *Cache) blobPath(hexDigest string) string {
	return filepath.Join(c.Dir, "blobs", "sha256", hexDigest)
}

func (c *Cache) refPath(key string) string { return filepath.Join(c.Dir, "refs", key) }

// Blob returns the archive with the given hex sha256, if it is cached and intact.
func (c *Cache) Blob(hexDigest string) ([]byte, bool) {
	data, err := os.ReadFile(c.blobPath(hexDigest))
	if err != nil || digestOf(data) != hexDigest {
		return nil, false
	}

	return data, true
}

// Lookup returns the archive a source resolved to when it was last fetched.
func (c *Cache) Lookup(s Source) ([]byte, string, bool) {
	ref, err := os.ReadFile(c.refPath(refKey(s)))
	if err != nil {
		return nil, "", false
	}

	d := strings.TrimSpace(string(ref))

	data, ok := c.Blob(d)
	if !ok {
		return nil, "", false
	}

	return data, d, true
}

// Store records an archive fetched for a source and returns its hex sha256.
func (c *Cache) Store(s Source, data []byte) (string, error) {
	d := digestOf(data)

	if _, ok := c.Blob(d); !ok {
		if err := writeAtomic(c.blobPath(d), data); err != nil {
			return "", err
		}
	}

	if err := writeAtomic(c.refPath(refKey(s)), []byte(d+"\n")); err != nil {
		return "", err
	}

	return d, nil
}

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("helm chart cache: %w", err)
	}

	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("helm chart cache: %w", err)
	}

	_, werr := f.Write(data)
	cerr := f.Close()

	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("helm chart cache: %w", err)
	}

	if err := os.Chmod(f.Name(), 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = os.Remove(f.Name())
		return fmt.Errorf("helm chart cache: %w", err)
	}

	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("helm chart cache: %w", err)
	}

	return nil
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)

	return hex.EncodeToString(sum[:])
}
