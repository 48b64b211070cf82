package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeFiles creates files (slash-separated paths → contents) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteTreeReplacesGeneratedFilesAndKeepsArtifacts(t *testing.T) {
	out := t.TempDir()
	writeFiles(t, out, map[string]string{
		"go/old/removed.go":                      "stale",
		"go/kept.go":                             "old",
		"nodejs/node_modules/x/index.js":         "dependency",
		"nodejs/bin/index.js":                    "compiled",
		"python/pkg/__pycache__/mod.cpython.pyc": "cache",
		"python/pulumi_x.egg-info/PKG-INFO":      "build metadata",
		"python/pkg/stale.py":                    "stale",
	})
	files := map[string][]byte{"go/kept.go": []byte("new"), "python/pkg/mod.py": []byte("new")}
	if err := writeTree(out, files); err != nil {
		t.Fatal(err)
	}

	got, err := existingFiles(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"go/kept.go", "python/pkg/mod.py"}; !reflect.DeepEqual(got, want) {
		t.Errorf("generated files after write: %v, want %v", got, want)
	}
	if content, _ := os.ReadFile(filepath.Join(out, "go", "kept.go")); !bytes.Equal(content, []byte("new")) {
		t.Errorf("go/kept.go = %q, want the new content", content)
	}
	if _, err := os.Stat(filepath.Join(out, "go", "old")); !os.IsNotExist(err) {
		t.Errorf("go/old/ left behind after its last file went: %v", err)
	}
	for _, artifact := range []string{
		"nodejs/node_modules/x/index.js", "nodejs/bin/index.js",
		"python/pkg/__pycache__/mod.cpython.pyc", "python/pulumi_x.egg-info/PKG-INFO",
	} {
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(artifact))); err != nil {
			t.Errorf("build artifact %s: %v", artifact, err)
		}
	}

	diffs, err := diffTree(out, files)
	if err != nil || len(diffs) != 0 {
		t.Errorf("diff right after writing: %v, %v", diffs, err)
	}
}

func TestWriteTreeRefusesForeignDirectories(t *testing.T) {
	out := t.TempDir()
	writeFiles(t, out, map[string]string{"go.mod": "module repo"})
	err := writeTree(out, map[string][]byte{"go/a.go": []byte("package a")})
	if err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Fatalf("error %v, want a refusal naming go.mod", err)
	}
	if _, err := os.Stat(filepath.Join(out, "go.mod")); err != nil {
		t.Errorf("go.mod was touched: %v", err)
	}
}

func TestDiffTree(t *testing.T) {
	out := t.TempDir()
	writeFiles(t, out, map[string]string{
		"go/same.go":               "same",
		"go/changed.go":            "old",
		"nodejs/extra.ts":          "extra",
		"nodejs/node_modules/a.js": "dependency",
	})
	diffs, err := diffTree(out, map[string][]byte{
		"go/same.go":            []byte("same"),
		"go/changed.go":         []byte("new"),
		"python/pyproject.toml": []byte("missing"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []fileDiff{{"differs", "go/changed.go"}, {"extra", "nodejs/extra.ts"}, {"missing", "python/pyproject.toml"}}
	if !reflect.DeepEqual(diffs, want) {
		t.Errorf("diffs %v, want %v", diffs, want)
	}

	missingDir, err := diffTree(filepath.Join(out, "absent"), map[string][]byte{"go/a.go": nil})
	if err != nil || !reflect.DeepEqual(missingDir, []fileDiff{{"missing", "go/a.go"}}) {
		t.Errorf("diff against a missing dir: %v, %v", missingDir, err)
	}
}

func TestRunCheckExitCodes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sdk")
	var stdout, stderr bytes.Buffer
	args := []string{"-schema", repoSchema, "-out", out}

	if code := run(append(args, "-check"), &stdout, &stderr); code != exitStale {
		t.Fatalf("check of an empty dir: exit %d, want %d\n%s", code, exitStale, stderr.String())
	}
	if !strings.Contains(stdout.String(), "missing  go/go.mod") {
		t.Errorf("check output does not list go/go.mod as missing:\n%s", stdout.String())
	}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("generate: exit %d\n%s", code, stderr.String())
	}
	if code := run(append(args, "-check"), &stdout, &stderr); code != 0 {
		t.Fatalf("check right after generating: exit %d\n%s", code, stdout.String())
	}
	if code := run([]string{"-schema", filepath.Join(t.TempDir(), "absent.json")}, &stdout, &stderr); code != exitError {
		t.Errorf("missing schema: exit %d, want %d", code, exitError)
	}
}
