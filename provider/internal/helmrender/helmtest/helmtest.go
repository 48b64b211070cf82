// Package helmtest gives tests real charts and real chart servers on loopback: the Cilium chart
// from its Go module (fetched through the module proxy at test time, never committed), a classic
// HTTP chart repository whose index is written by Helm's repo package, and an OCI registry
// (distribution/v3, in memory). Servers stop when the test ends.
package helmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory" // registry storage
	"github.com/sirupsen/logrus"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
)

// CiliumModule is the Go module that carries the Cilium chart, and CiliumVersion its version.
const (
	CiliumModule  = "github.com/cilium/cilium"
	CiliumVersion = "1.18.0"
)

var (
	ciliumOnce sync.Once
	ciliumDir  string
	ciliumErr  error
)

// CiliumChartDir returns the unpacked Cilium chart of github.com/cilium/cilium@v1.18.0, downloaded
// through the Go module proxy (`go mod download`) into the module cache.
func CiliumChartDir(tb testing.TB) string {
	tb.Helper()

	ciliumOnce.Do(func() {
		dir, err := os.MkdirTemp("", "helmtest-gomod-")
		if err != nil {
			ciliumErr = err
			return
		}
		defer os.RemoveAll(dir)

		cmd := exec.Command("go", "mod", "download", "-json", CiliumModule+"@v"+CiliumVersion)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")

		out, err := cmd.Output()
		if err != nil {
			ciliumErr = fmt.Errorf("go mod download %s@v%s: %w: %s", CiliumModule, CiliumVersion, err, out)
			return
		}

		var mod struct{ Dir, Error string }
		if err := json.Unmarshal(out, &mod); err != nil || mod.Error != "" || mod.Dir == "" {
			ciliumErr = fmt.Errorf("go mod download %s: %v %s", CiliumModule, err, mod.Error)
			return
		}

		ciliumDir = filepath.Join(mod.Dir, "install", "kubernetes", "cilium")
	})

	if ciliumErr != nil {
		tb.Fatal(ciliumErr)
	}

	return ciliumDir
}

// Package packages a chart directory into dest as <name>-<version>.tgz, the way `helm package`
// does, and returns the archive's path.
func Package(tb testing.TB, chartDir, dest string) string {
	tb.Helper()

	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		tb.Fatal(err)
	}

	p, err := chartutil.Save(ch, dest)
	if err != nil {
		tb.Fatal(err)
	}

	return p
}

// CiliumArchive packages the Cilium chart into a fresh directory and returns the .tgz path.
func CiliumArchive(tb testing.TB) string {
	tb.Helper()

	return Package(tb, CiliumChartDir(tb), tb.TempDir())
}

// Server is a chart server on loopback that counts the requests it answers.
type Server struct {
	URL      string
	requests atomic.Int64
	srv      *httptest.Server
}

// Requests is the number of requests answered so far.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Close stops the server; later requests fail to connect.
func (s *Server) Close() { s.srv.Close() }

func serve(tb testing.TB, h http.Handler) *Server {
	s := &Server{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL
	tb.Cleanup(s.srv.Close)

	return s
}

// Repository serves the given archives as a classic chart repository: the archives under
// charts/ and an index.yaml written by Helm's repo package (relative URLs, each archive's digest).
func Repository(tb testing.TB, archives ...string) *Server {
	tb.Helper()

	dir := tb.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		tb.Fatal(err)
	}

	for _, a := range archives {
		data, err := os.ReadFile(a)
		if err != nil {
			tb.Fatal(err)
		}

		if err := os.WriteFile(filepath.Join(dir, "charts", filepath.Base(a)), data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}

	idx, err := repo.IndexDirectory(dir, "")
	if err != nil {
		tb.Fatal(err)
	}

	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		tb.Fatal(err)
	}

	return serve(tb, http.FileServer(http.Dir(dir)))
}

// Registry starts an in-memory OCI registry (distribution/v3) on loopback and pushes the given
// archives to <host>/charts/<name>:<version> with Helm's registry client. Its URL is the
// repository to use: oci://<host>/charts.
func Registry(tb testing.TB, archives ...string) *Server {
	tb.Helper()

	logrus.SetOutput(io.Discard)

	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.HTTP.Secret = "helmtest"
	cfg.Log.AccessLog.Disabled = true
	cfg.Log.Level = "error"

	app := handlers.NewApp(context.Background(), cfg)
	s := serve(tb, app)

	host := strings.TrimPrefix(s.URL, "http://")
	s.URL = "oci://" + host + "/charts"

	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard),
		registry.ClientOptCredentialsFile(filepath.Join(tb.TempDir(), "config.json")))
	if err != nil {
		tb.Fatal(err)
	}

	for _, a := range archives {
		data, err := os.ReadFile(a)
		if err != nil {
			tb.Fatal(err)
		}

		ch, err := loader.LoadArchive(bytes.NewReader(data))
		if err != nil {
			tb.Fatal(err)
		}

		ref := fmt.Sprintf("%s/charts/%s:%s", host, ch.Metadata.Name, ch.Metadata.Version)
		if _, err := rc.Push(data, ref, registry.PushOptStrictMode(true)); err != nil {
			tb.Fatalf("push %s: %v", ref, err)
		}
	}

	return s
}
