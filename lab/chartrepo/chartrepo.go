// Package chartrepo is the lab's Helm chart repository: a classic HTTP chart repository on
// loopback, its index written by Helm's own repo package, serving the real Cilium chart and NVIDIA's
// device plugin chart from their Go modules (fetched through the Go module proxy when first needed,
// never committed), and the lab's own stand-ins of the Proxmox CSI plugin's and cloud controller
// manager's charts (standin/, see proxmox.go; the upstream charts cannot be had here). It stands in for https://helm.cilium.io,
// https://nvidia.github.io/k8s-device-plugin and oci://ghcr.io/sergelogvinov/charts, which this
// machine cannot reach.
package chartrepo

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
)

// CiliumModule is the Go module that carries the Cilium chart, and CiliumVersion its version.
const (
	CiliumModule  = "github.com/cilium/cilium"
	CiliumVersion = "1.18.0"
)

// NvidiaDevicePluginModule carries NVIDIA's device plugin chart (deployments/helm), and
// NvidiaDevicePluginVersion its version, the newest the module proxy serves.
const (
	NvidiaDevicePluginModule  = "github.com/NVIDIA/k8s-device-plugin"
	NvidiaDevicePluginVersion = "0.18.0"
)

// CiliumChartDir returns the unpacked Cilium chart of github.com/cilium/cilium@v1.18.0,
// downloaded through the Go module proxy (`go mod download`) into the module cache.
var CiliumChartDir = sync.OnceValues(func() (string, error) {
	dir, err := moduleDir(CiliumModule, CiliumVersion)
	if err != nil {
		return "", err
	}

	return filepath.Join(dir, "install", "kubernetes", "cilium"), nil
})

// NvidiaDevicePluginChartDir returns the unpacked chart of NVIDIA's device plugin (with its
// node-feature-discovery subchart archive), from its Go module.
var NvidiaDevicePluginChartDir = sync.OnceValues(func() (string, error) {
	dir, err := moduleDir(NvidiaDevicePluginModule, NvidiaDevicePluginVersion)
	if err != nil {
		return "", err
	}

	return filepath.Join(dir, "deployments", "helm", "nvidia-device-plugin"), nil
})

// moduleDir downloads module@v<version> through the Go module proxy into the module cache and
// returns its directory.
func moduleDir(module, version string) (string, error) {
	dir, err := os.MkdirTemp("", "charts-gomod-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	cmd := exec.Command("go", "mod", "download", "-json", module+"@v"+version)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")

	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@v%s: %w: %s", module, version, err, out)
	}

	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %v %s", module, err, mod.Error)
	}

	return mod.Dir, nil
}

// CiliumCRDDir is the directory of the CRDs Cilium's operator registers when it starts
// (<version>/<name>.yaml), in the Cilium module.
func CiliumCRDDir() (string, error) {
	dir, err := CiliumChartDir()
	if err != nil {
		return "", err
	}

	return filepath.Join(dir, "..", "..", "..", "pkg", "k8s", "apis", "cilium.io", "client", "crds"), nil
}

// HelloVersions are the versions of the lab's small test chart "hello" (HelloArchives).
var HelloVersions = []string{"1.0.0", "1.1.0"}

// HelloArchives packages the small chart "hello" in each of HelloVersions into dest. Every
// version has a ConfigMap <release>-config (data.greeting from values.greeting, data.version) and
// a Deployment <release>; 1.0.0 also has a Service <release>-legacy, which 1.1.0 drops for a
// ConfigMap <release>-extra: a version change that changes, adds and prunes objects.
func HelloArchives(dest string) ([]string, error) {
	var out []string

	for _, v := range HelloVersions {
		dir := filepath.Join(dest, "hello-"+v, "hello")
		if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
			return nil, err
		}

		files := map[string]string{
			"Chart.yaml":  "apiVersion: v2\nname: hello\nversion: " + v + "\nappVersion: \"" + v + "\"\n",
			"values.yaml": "greeting: hello\nimage: registry.k8s.io/pause:3.10\n",
			"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
  namespace: {{ .Release.Namespace }}
data:
  greeting: {{ .Values.greeting | quote }}
  version: {{ .Chart.Version | quote }}
`,
			"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
        - name: hello
          image: {{ .Values.image }}
`,
		}

		if v == "1.0.0" {
			files["templates/legacy.yaml"] = `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-legacy
  namespace: {{ .Release.Namespace }}
spec:
  selector: {app: {{ .Release.Name }}}
  ports: [{port: 80}]
`
		} else {
			files["templates/extra.yaml"] = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-extra
  namespace: {{ .Release.Namespace }}
data: {added: {{ .Chart.Version | quote }}}
`
		}

		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				return nil, err
			}
		}

		archive, err := Package(dir, dest)
		if err != nil {
			return nil, err
		}

		out = append(out, archive)
	}

	return out, nil
}

// Package packages a chart directory into dest as <name>-<version>.tgz, as `helm package` does,
// and returns the archive's path.
func Package(chartDir, dest string) (string, error) {
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return "", err
	}

	return chartutil.Save(ch, dest)
}

// CiliumArchive packages the Cilium chart into dest and returns the .tgz path.
func CiliumArchive(dest string) (string, error) {
	dir, err := CiliumChartDir()
	if err != nil {
		return "", err
	}

	return Package(dir, dest)
}

// NvidiaDevicePluginArchive packages NVIDIA's device plugin chart into dest and returns the .tgz path.
func NvidiaDevicePluginArchive(dest string) (string, error) {
	dir, err := NvidiaDevicePluginChartDir()
	if err != nil {
		return "", err
	}

	return Package(dir, dest)
}

// Server is a chart server on loopback that counts the requests it answers.
type Server struct {
	// URL is the repository to give a chart: http://127.0.0.1:<port>.
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

// Serve serves h on a loopback port until ctx ends or Close, counting the requests.
func Serve(ctx context.Context, h http.Handler) (*Server, error) {
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

// Repository serves archives as a classic chart repository until ctx ends or Close: the
// archives under charts/ and an index.yaml written by Helm's repo package (relative URLs, each
// archive's digest).
func Repository(ctx context.Context, archives ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "charts-repo-")
	if err != nil {
		return nil, err
	}

	if err := writeRepository(dir, archives); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}

	s, err := Serve(ctx, http.FileServer(http.Dir(dir)))
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
