package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// isBuildArtifact reports whether rel, a slash-separated path relative to the output directory,
// was left by installing or compiling an SDK in place rather than generated: sdkgen neither
// deletes nor reports such files.
func isBuildArtifact(rel string) bool {
	for _, dir := range []string{"nodejs/bin/", "python/build/", "python/dist/"} {
		if strings.HasPrefix(rel, dir) {
			return true
		}
	}
	for _, part := range strings.Split(rel, "/") {
		switch {
		case part == "node_modules", part == "__pycache__", part == ".venv",
			strings.HasSuffix(part, ".egg-info"):
			return true
		}
	}
	return false
}

// existingFiles lists the regular files under dir that are not build artifacts, as
// slash-separated paths relative to dir. A missing dir has no files.
func existingFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if isBuildArtifact(rel + "/") {
				return fs.SkipDir
			}
			return nil
		}
		if !isBuildArtifact(rel) {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// checkOwned refuses an output directory holding anything besides the language directories, so
// that a mistaken -out (the repository root, say) is never emptied.
func checkOwned(outDir string) error {
	entries, err := os.ReadDir(outDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || !slices.Contains(languages, e.Name()) {
			return fmt.Errorf("refusing to write to %s: it holds %s, which sdkgen does not generate",
				outDir, e.Name())
		}
	}
	return nil
}

// writeTree makes outDir hold exactly files (besides build artifacts): it deletes every other
// file, prunes directories left empty, and writes files.
func writeTree(outDir string, files map[string][]byte) error {
	if err := checkOwned(outDir); err != nil {
		return err
	}
	existing, err := existingFiles(outDir)
	if err != nil {
		return err
	}
	for _, rel := range existing {
		if _, keep := files[rel]; keep {
			continue
		}
		if err := os.Remove(filepath.Join(outDir, filepath.FromSlash(rel))); err != nil {
			return err
		}
		if err := pruneEmptyDirs(outDir, path.Dir(rel)); err != nil {
			return err
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(outDir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, files[rel]) {
			continue // keep the modification time of unchanged files
		}
		if err := os.WriteFile(p, files[rel], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// pruneEmptyDirs removes dir (relative to outDir) and its parents below outDir while they are
// empty.
func pruneEmptyDirs(outDir, dir string) error {
	for ; dir != "." && dir != "/"; dir = path.Dir(dir) {
		p := filepath.Join(outDir, filepath.FromSlash(dir))
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			return nil
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return nil
}

// fileDiff is one way outDir differs from the generated files.
type fileDiff struct {
	kind string // "differs", "missing" or "extra"
	path string // slash-separated, relative to outDir
}

// diffTree compares outDir with files and returns the differences sorted by path.
func diffTree(outDir string, files map[string][]byte) ([]fileDiff, error) {
	existing, err := existingFiles(outDir)
	if err != nil {
		return nil, err
	}
	var diffs []fileDiff
	for _, rel := range existing {
		if _, ok := files[rel]; !ok {
			diffs = append(diffs, fileDiff{"extra", rel})
		}
	}
	for rel, want := range files {
		have, err := os.ReadFile(filepath.Join(outDir, filepath.FromSlash(rel)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			diffs = append(diffs, fileDiff{"missing", rel})
		case err != nil:
			return nil, err
		case !bytes.Equal(have, want):
			diffs = append(diffs, fileDiff{"differs", rel})
		}
	}
	slices.SortFunc(diffs, func(a, b fileDiff) int { return strings.Compare(a.path, b.path) })
	return diffs, nil
}
