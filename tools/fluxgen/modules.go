package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// module is one module version in the module cache, as `go mod download -json` reports it.
type module struct {
	Path    string
	Version string
	Dir     string
	Sum     string
	Error   string
}

// downloader fetches module versions through the go command (the Go module proxy and the
// checksum database, as configured), caching the answers of one run.
type downloader struct {
	goCmd string
	seen  map[string]module
}

func newDownloader() *downloader {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	return &downloader{goCmd: goCmd, seen: map[string]module{}}
}

// download returns path@version from the module cache, downloading it if needed. It runs
// outside any module (an empty temp dir), so nothing's go.mod or go.sum changes.
func (d *downloader) download(path, version string) (module, error) {
	key := path + "@" + version
	if m, ok := d.seen[key]; ok {
		return m, nil
	}
	dir, err := os.MkdirTemp("", "fluxgen-download-")
	if err != nil {
		return module{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cmd := exec.Command(d.goCmd, "mod", "download", "-json", key)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, runErr := cmd.Output()
	var m module
	if err := json.Unmarshal(out, &m); err != nil {
		return module{}, fmt.Errorf("go mod download %s: %v: %s", key, runErr, strings.TrimSpace(stderr.String()))
	}
	if m.Error != "" {
		return module{}, fmt.Errorf("go mod download %s: %s", key, m.Error)
	}
	if runErr != nil || m.Dir == "" || m.Sum == "" {
		return module{}, fmt.Errorf("go mod download %s: %v (dir %q, sum %q): %s", key, runErr, m.Dir, m.Sum, strings.TrimSpace(stderr.String()))
	}
	d.seen[key] = m
	return m, nil
}

// treeDigest maps every regular file under dir (slash paths relative to dir) to its sha256,
// leaving out the names in skip.
func treeDigest(dir string, skip ...string) (map[string]string, error) {
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if slices.Contains(skip, rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		sums[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	return sums, err
}

// sameTree reports how the files of two module directories differ (nil when they do not),
// leaving out the names in skip.
func sameTree(a, b string, skip ...string) error {
	da, err := treeDigest(a, skip...)
	if err != nil {
		return err
	}
	db, err := treeDigest(b, skip...)
	if err != nil {
		return err
	}
	var diffs []string
	for name, sum := range da {
		if other, ok := db[name]; !ok {
			diffs = append(diffs, "only in "+filepath.Base(a)+": "+name)
		} else if other != sum {
			diffs = append(diffs, "differs: "+name)
		}
	}
	for name := range db {
		if _, ok := da[name]; !ok {
			diffs = append(diffs, "only in "+filepath.Base(b)+": "+name)
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		return fmt.Errorf("%s and %s differ: %s", a, b, strings.Join(diffs, "; "))
	}
	return nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
