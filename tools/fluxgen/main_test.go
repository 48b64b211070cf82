package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedFilesAreCurrent regenerates the files provider/internal/flux commits and fails
// when they differ. It needs the Go module proxy (the modules are cached after the first run).
func TestCommittedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads Flux's modules through the module proxy")
	}
	dir := filepath.Join("..", "..", "provider", "internal", "flux")
	if err := run(filepath.Join(dir, "manifests", "flux-"+fluxVersion+".yaml"), filepath.Join(dir, "testdata", "sync-golden.json"), true); err != nil {
		t.Fatal(err)
	}
}

func TestSameTree(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "v1/types.go", "package v1\n")
	write(b, "v1/types.go", "package v1\n")
	write(a, "go.mod", "module x\ngo 1.25\n")
	write(b, "go.mod", "module x\ngo 1.26\n")
	if err := sameTree(a, b, "go.mod", "go.sum"); err != nil {
		t.Fatalf("same sources but go.mod: %v", err)
	}
	if err := sameTree(a, b); err == nil {
		t.Fatal("go.mod differs, but sameTree says the trees are the same")
	}
	write(b, "v1/types.go", "package v1\n\ntype X struct{}\n")
	if err := sameTree(a, b, "go.mod"); err == nil {
		t.Fatal("types.go differs, but sameTree says the trees are the same")
	}
	write(b, "v1/extra.go", "package v1\n")
	write(b, "v1/types.go", "package v1\n")
	if err := sameTree(a, b, "go.mod"); err == nil {
		t.Fatal("b has one more file, but sameTree says the trees are the same")
	}
}

func TestReleaseURL(t *testing.T) {
	u := "https://github.com/fluxcd/notification-controller/releases/download/v1.9.4/notification-controller.deployment.yaml"
	s := releaseURL.FindStringSubmatch("- " + u + "\n")
	if s == nil || s[0] != u || s[1] != "notification-controller" || s[2] != "v1.9.4" || s[3] != "notification-controller" || s[4] != "deployment" {
		t.Fatalf("releaseURL on %s: %q", u, s)
	}
}
