package upstream

import (
	"archive/zip"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArgoCDInstall reads Argo CD's install manifest from its verified module zip and serves it
// under GitHub's raw path.
func TestArgoCDInstall(t *testing.T) {
	body, err := ArgoCDInstall(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	for _, want := range []string{"name: applications.argoproj.io", "kind: Deployment", "name: argocd-server"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("install.yaml has no %q", want)
		}
	}

	srv, err := Serve(t.Context(), map[string][]byte{ArgoCDInstallPath: body})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close() //nolint:errcheck

	resp, err := http.Get(srv.URL + ArgoCDInstallPath)
	if err != nil {
		t.Fatal(err)
	}

	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()

	if len(got) != len(body) {
		t.Errorf("served %d bytes, want %d", len(got), len(body))
	}

	if resp, err := http.Get(srv.URL + "/other"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown path answered %v %v", resp, err)
	}
}

// TestVerifyRefusesATamperedZip: a zip whose hash is not the pinned one is never read.
func TestVerifyRefusesATamperedZip(t *testing.T) {
	f := filepath.Join(t.TempDir(), "m.zip")

	out, err := os.Create(f)
	if err != nil {
		t.Fatal(err)
	}

	z := zip.NewWriter(out)
	w, _ := z.Create(ArgoCDModule + "@" + ArgoCDVersion + "/manifests/install.yaml")
	_, _ = w.Write([]byte("kind: Evil\n"))
	_ = z.Close()
	_ = out.Close()

	if err := verify(f, argoCDHash); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("a tampered zip verified: %v", err)
	}
}

// TestModuleZipFromAProxy downloads through a module proxy (an empty module cache and lab cache)
// and refuses what does not match the hash.
func TestModuleZipFromAProxy(t *testing.T) {
	zipFile, err := moduleZip(t.Context(), ArgoCDModule, ArgoCDVersion, argoCDHash)
	if err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(zipFile)
	if err != nil {
		t.Fatal(err)
	}

	srv, err := Serve(t.Context(), map[string][]byte{"/github.com/argoproj/argo-cd/v3/@v/" + ArgoCDVersion + ".zip": data})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close() //nolint:errcheck

	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GOPROXY", srv.URL+",direct")
	t.Setenv("GOFLAGS", "-modcacherw")

	got, err := moduleZip(context.Background(), ArgoCDModule, ArgoCDVersion, argoCDHash)
	if err != nil {
		t.Fatal(err)
	}

	if !strings.HasPrefix(got, os.Getenv("XDG_CACHE_HOME")) {
		t.Errorf("downloaded to %s, not the lab's cache", got)
	}

	if _, err := moduleZip(context.Background(), ArgoCDModule, "v0.0.1", argoCDHash); err == nil {
		t.Error("a version the proxy does not have was found")
	}
}
