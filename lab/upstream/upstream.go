// Package upstream gives the lab the upstream manifests users install from GitHub (Argo CD's
// manifests/install.yaml), taken from the project's Go module on the Go module proxy — the only
// place this machine can reach — and serves them on loopback under the paths they have on
// raw.githubusercontent.com, so a program only swaps the host of its URL.
//
// The module's zip is verified against its go.sum hash before anything is read from it, and
// cached by version in the user's cache directory (or found in the Go module cache when `go`
// downloaded it already).
package upstream

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/chartrepo"
)

// Argo CD, pinned: the module version and its go.sum hash (h1:, the zip's dirhash).
const (
	ArgoCDModule  = "github.com/argoproj/argo-cd/v3"
	ArgoCDVersion = "v3.6.1"
	argoCDHash    = "h1:OmhqeKiR3C//awbFrhQqFdtRI+Qiv17j8vqm3UkMj/g="
)

// ArgoCDInstallPath is where GitHub serves Argo CD's install manifest at ArgoCDVersion, under
// https://raw.githubusercontent.com; the lab's server answers the same path.
const ArgoCDInstallPath = "/argoproj/argo-cd/" + ArgoCDVersion + "/manifests/install.yaml"

// ArgoCDInstall is manifests/install.yaml of Argo CD at ArgoCDVersion.
func ArgoCDInstall(ctx context.Context) ([]byte, error) {
	zipFile, err := moduleZip(ctx, ArgoCDModule, ArgoCDVersion, argoCDHash)
	if err != nil {
		return nil, err
	}

	return readFile(zipFile, ArgoCDModule+"@"+ArgoCDVersion+"/manifests/install.yaml")
}

// Server serves fixed files on loopback.
type Server = chartrepo.Server

// Serve serves files (by URL path) on a loopback port until ctx ends or Close.
func Serve(ctx context.Context, files map[string][]byte) (*Server, error) {
	return chartrepo.Serve(ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}

		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(body)
	}))
}

// moduleZip is the path of a verified zip of mod@version: from the Go module cache, else from
// the lab's cache, else downloaded from the Go module proxy into the lab's cache.
func moduleZip(ctx context.Context, mod, version, hash string) (string, error) {
	escaped, err := module.EscapePath(mod)
	if err != nil {
		return "", err
	}

	rel := path.Join(escaped, "@v", version+".zip")

	if dir := goEnv(ctx, "GOMODCACHE"); dir != "" {
		f := filepath.Join(dir, "cache", "download", filepath.FromSlash(rel))
		if verify(f, hash) == nil {
			return f, nil
		}
	}

	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}

	f := filepath.Join(cache, "talos-proxmox-lab", "modules", filepath.FromSlash(rel))
	if verify(f, hash) == nil {
		return f, nil
	}

	if err := download(ctx, rel, f); err != nil {
		return "", fmt.Errorf("%s@%s: %w", mod, version, err)
	}

	if err := verify(f, hash); err != nil {
		_ = os.Remove(f)
		return "", fmt.Errorf("%s@%s from the module proxy: %w", mod, version, err)
	}

	return f, nil
}

func verify(zipFile, want string) error {
	got, err := dirhash.HashZip(zipFile, dirhash.Hash1)
	if err != nil {
		return err
	}

	if got != want {
		return fmt.Errorf("checksum mismatch: %s, want %s", got, want)
	}

	return nil
}

// download fetches rel from the first proxy of GOPROXY into dest (atomically).
func download(ctx context.Context, rel, dest string) error {
	proxy := ""

	for _, p := range strings.FieldsFunc(goEnv(ctx, "GOPROXY"), func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" && p != "off" {
			proxy = strings.TrimSuffix(p, "/")
			break
		}
	}

	if proxy == "" {
		return fmt.Errorf("GOPROXY names no module proxy to download from")
	}

	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, proxy+"/"+rel, nil)
	if err != nil {
		return err
	}

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck

	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/%s: %s", proxy, rel, resp.Status)
	}

	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}

	tmp, err := os.CreateTemp(filepath.Dir(dest), ".download-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck

	if _, err := io.Copy(tmp, resp.Body); err != nil {
		_ = tmp.Close()
		return err
	}

	if err := tmp.Close(); err != nil {
		return err
	}

	return os.Rename(tmp.Name(), dest)
}

func readFile(zipFile, name string) ([]byte, error) {
	z, err := zip.OpenReader(zipFile)
	if err != nil {
		return nil, err
	}
	defer z.Close() //nolint:errcheck

	f, err := z.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", zipFile, err)
	}
	defer f.Close() //nolint:errcheck

	return io.ReadAll(f)
}

// goEnv is `go env name` (the value the go command would use, GOPROXY's default included).
func goEnv(ctx context.Context, name string) string {
	out, err := exec.CommandContext(ctx, "go", "env", name).Output()
	if err != nil {
		return os.Getenv(name)
	}

	return strings.TrimSpace(string(out))
}
