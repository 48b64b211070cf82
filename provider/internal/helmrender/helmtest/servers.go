package helmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

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

// ciliumChartDir returns the unpacked Cilium chart of github.com/cilium/cilium@v1.18.0,
// downloaded through the Go module proxy (`go mod download`) into the module cache.
var ciliumChartDir = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "charts-gomod-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	cmd := exec.Command("go", "mod", "download", "-json", CiliumModule+"@v"+CiliumVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")

	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@v%s: %w: %s", CiliumModule, CiliumVersion, err, out)
	}

	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %v %s", CiliumModule, err, mod.Error)
	}

	return filepath.Join(mod.Dir, "install", "kubernetes", "cilium"), nil
})

// packageChart packages a chart directory into dest as <name>-<version>.tgz, as `helm package` does,
// and returns the archive's path.
func packageChart(chartDir, dest string) (string, error) {
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return "", err
	}

	return chartutil.Save(ch, dest)
}

// Server is a chart server on loopback that counts the requests it answers.
type Server struct {
	// URL is the repository to give a chart: http://127.0.0.1:<port> for a classic repository,
	// oci://127.0.0.1:<port>/charts for a registry.
	URL      string
	requests atomic.Int64
	srv      *http.Server
	ln       net.Listener
	dir      string
}

// Requests is the number of requests answered so far.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Close stops the server; later requests fail to connect.
func (s *Server) Close() error {
	err := s.srv.Close()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}

	return err
}

func serve(ctx context.Context, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}

	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h.ServeHTTP(w, r)
	})}

	go func() { _ = s.srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = s.Close()
	}()

	return s, nil
}

// startRepository serves archives as a classic chart repository until ctx ends or Close: the
// archives under charts/ and an index.yaml written by Helm's repo package (relative URLs, each
// archive's digest).
func startRepository(ctx context.Context, archives ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "charts-repo-")
	if err != nil {
		return nil, err
	}

	if err := writeRepository(dir, archives); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}

	s, err := serve(ctx, http.FileServer(http.Dir(dir)))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}

	s.dir = dir

	return s, nil
}

func writeRepository(dir string, archives []string) error {
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		return err
	}

	for _, a := range archives {
		data, err := os.ReadFile(a)
		if err != nil {
			return err
		}

		if err := os.WriteFile(filepath.Join(dir, "charts", filepath.Base(a)), data, 0o644); err != nil {
			return err
		}
	}

	idx, err := repo.IndexDirectory(dir, "")
	if err != nil {
		return err
	}

	return idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644)
}

// startRegistry starts an in-memory OCI registry (distribution/v3) on loopback until ctx ends or
// Close, and pushes the archives to <host>/charts/<name>:<version> with Helm's registry client.
func startRegistry(ctx context.Context, archives ...string) (*Server, error) {
	logrus.SetOutput(io.Discard)

	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.HTTP.Secret = "charts-lab-registry"
	cfg.Log.AccessLog.Disabled = true
	cfg.Log.Level = "error"

	s, err := serve(ctx, handlers.NewApp(ctx, cfg))
	if err != nil {
		return nil, err
	}

	host := strings.TrimPrefix(s.URL, "http://")
	s.URL = "oci://" + host + "/charts"

	creds, err := os.MkdirTemp("", "charts-registry-")
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	defer func() { _ = os.RemoveAll(creds) }()

	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(io.Discard),
		registry.ClientOptCredentialsFile(filepath.Join(creds, "config.json")))
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}

	for _, a := range archives {
		if err := push(rc, host, a); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}

	return s, nil
}

func push(rc *registry.Client, host, archive string) error {
	data, err := os.ReadFile(archive)
	if err != nil {
		return err
	}

	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return err
	}

	ref := fmt.Sprintf("%s/charts/%s:%s", host, ch.Metadata.Name, ch.Metadata.Version)
	if _, err := rc.Push(data, ref, registry.PushOptStrictMode(true)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}

	return nil
}
