//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// Release versions the test stamps: lower than any version this project releases and not
// provider/VERSION, so the engine finds a plugin only if the SDKs ask for exactly the installed
// one; a prerelease, so the Python package goes through PEP 440's spelling of it.
const (
	releaseVersion = "0.0.1-rc.1"
	releasePEP440  = "0.0.1rc1"
)

// releaseFiles are the packages `make release` builds for this machine's platform.
type releaseFiles struct {
	dir, archive, wheel, npm string
}

// archiveName is the plugin archive of version for this machine, as Pulumi names it.
func archiveName(version string) string {
	return "pulumi-resource-talos-proxmox-v" + version + "-" + runtime.GOOS + "-" + runtime.GOARCH + ".tar.gz"
}

// TestReleasePackagesInstallAndPreviewOnTheLab builds the release for this machine's platform
// with tools/release/release.sh (what `make release` runs for four platforms), then acts as a
// user, each language with an empty PULUMI_HOME: the Python wheel in a fresh virtualenv with the
// plugin installed from its archive (`pulumi plugin install … --file`), the npm tarball in a
// fresh Node.js project with the plugin downloaded by the engine through the SDK's
// pluginDownloadURL (from a loopback stand-in for GitHub releases), and `pulumi preview` of
// copies of examples/python and examples/typescript against the lab. Nothing of ours comes from the
// working tree but the example programs and the lab's own child plugins.
func TestReleasePackagesInstallAndPreviewOnTheLab(t *testing.T) {
	t.Parallel() // its own labs (subnets 55 and 56), Pulumi homes, backends and scratch copies

	if v := os.Getenv("TALOS_PROXMOX_VERSION"); v == releaseVersion {
		t.Fatalf("provider/VERSION is %s, the test's release version: pick another", v)
	}

	files := buildRelease(t)

	t.Run("python", func(t *testing.T) {
		t.Parallel()

		e := newEnv(t)
		copyDir(t, repoPath(t, "examples/python"), e.dir)

		// The example's requirements point at the checkout's sdk/python: the wheel instead.
		req := "pulumi==3.259.0\n" + files.wheel + "\n"
		if err := os.WriteFile(filepath.Join(e.dir, "requirements.txt"), []byte(req), 0o644); err != nil {
			t.Fatal(err)
		}

		python := "python3"
		if v := os.Getenv("PYTHON"); v != "" {
			python = v
		}

		venv := filepath.Join(e.dir, "venv")
		run(t, e.dir, python, "-m", "venv", "venv")
		run(t, e.dir, filepath.Join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check", "-r", "requirements.txt")

		out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
			"import importlib.metadata as m; print(m.version('pulumi_talos_proxmox'))").Output()
		if err != nil || strings.TrimSpace(string(out)) != releasePEP440 {
			t.Fatalf("installed pulumi_talos_proxmox is %q (%v), want %s", out, err, releasePEP440)
		}

		p := releaseStack(t, e, 55, func(p *lab.Pulumi) {
			// As a user installs a release archive by hand (docs/install.md).
			mustRun(t, p, "plugin", "install", "resource", "talos-proxmox", "v"+releaseVersion, "--file", files.archive)
		})
		p.Env = append(p.Env, "VIRTUAL_ENV="+venv, "PATH="+filepath.Join(venv, "bin")+string(os.PathListSeparator)+e.bin+
			string(os.PathListSeparator)+os.Getenv("PATH"))
		checkPreview(t, p)
	})

	t.Run("typescript", func(t *testing.T) {
		t.Parallel()

		e := newEnv(t)
		copyDir(t, repoPath(t, "examples/typescript"), e.dir)

		pkg, err := os.ReadFile(filepath.Join(e.dir, "package.json"))
		if err != nil {
			t.Fatal(err)
		}

		replaced := strings.Replace(string(pkg), "file:../../sdk/nodejs/bin", "file:"+files.npm, 1)
		if replaced == string(pkg) {
			t.Fatal("examples/typescript/package.json no longer depends on file:../../sdk/nodejs/bin: update the test")
		}

		if err := os.WriteFile(filepath.Join(e.dir, "package.json"), []byte(replaced), 0o644); err != nil {
			t.Fatal(err)
		}

		run(t, e.dir, "npm", "install", "--no-audit", "--no-fund", "--loglevel=error")

		// No install: the engine downloads the plugin from where the SDK's pluginDownloadURL
		// (github://api.github.com/talos-proxmox/pulumi-talos-proxmox) points, redirected to a
		// loopback server holding the release as GitHub would. The override matches only that URL,
		// so the download succeeds only if the SDK carries it and asks for the archive's version.
		var requested []string
		var mu sync.Mutex
		serve := http.FileServer(http.Dir(files.dir))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			requested = append(requested, r.URL.Path)
			mu.Unlock()
			serve.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)

		p := releaseStack(t, e, 56, func(p *lab.Pulumi) {
			p.Env = append(p.Env, "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=false",
				`PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES=^github://api\.github\.com/talos-proxmox/pulumi-talos-proxmox$=`+srv.URL)
		})
		checkPreview(t, p)

		mu.Lock()
		defer mu.Unlock()

		want := "/" + filepath.Base(archiveName(releaseVersion))
		if len(requested) == 0 || requested[0] != want {
			t.Errorf("the engine asked the release server for %v, want %s", requested, want)
		}
	})
}

// buildRelease runs the release script for this machine's platform into a scratch directory and
// returns the packages, failing if one is missing or misnamed.
func buildRelease(t *testing.T) releaseFiles {
	t.Helper()

	dist := t.TempDir()
	cmd := exec.CommandContext(t.Context(), repoPath(t, "tools/release/release.sh"), "--platforms", "host", releaseVersion, dist)
	cmd.Env = append(os.Environ(), "PULUMI="+filepath.Join(os.Getenv("PULUMI_TOOLCHAIN_BIN"), "pulumi"))

	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("release.sh: %v\n%s", err, out)
	}

	t.Logf("release.sh:\n%s", out)

	files := releaseFiles{
		dir:     dist,
		archive: filepath.Join(dist, archiveName(releaseVersion)),
		wheel:   filepath.Join(dist, "pulumi_talos_proxmox-"+releasePEP440+"-py3-none-any.whl"),
		npm:     filepath.Join(dist, "talos-proxmox-pulumi-"+releaseVersion+".tgz"),
	}

	for _, f := range []string{files.archive, files.wheel, files.npm, filepath.Join(dist, "pulumi_talos_proxmox-"+releasePEP440+".tar.gz"),
		filepath.Join(dist, "sdk", "go", "talosproxmox", "pulumi-plugin.json"), filepath.Join(dist, "SHA256SUMS")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the release lacks %s: %v", filepath.Base(f), err)
		}
	}

	return files
}

// releaseStack prepares stack "lab" of the program in e.dir against a lab on subnet, with a
// PULUMI_HOME that is empty until install runs (it puts the talos-proxmox plugin there, or
// arranges for the engine to download it) and the lab's child plugins are installed beside it.
func releaseStack(t *testing.T, e *env, subnet int, install func(*lab.Pulumi)) *lab.Pulumi {
	t.Helper()

	p := &lab.Pulumi{Bin: e.bin, Dir: e.dir, Env: append(e.environ, "PULUMI_TALOS_LAB_TIMEOUT=1m")}
	if plugins := installedPlugins(t, p); len(plugins) != 0 {
		t.Fatalf("PULUMI_HOME is not empty before the install: %v", plugins)
	}

	install(p)

	var children []lab.Plugin

	for _, pl := range lab.Plugins("", "", os.Getenv("TALOS_LAB_BIN")) {
		if pl.Name != "talos-proxmox" {
			children = append(children, pl)
		}
	}

	if err := p.InstallPlugins(t.Context(), children); err != nil {
		t.Fatal(err)
	}

	l, err := lab.Start(t.Context(), lab.Options{Subnet: subnet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	watchSchema(t, l)

	mustRun(t, p, "stack", "init", "lab")

	if err := p.SetConfig(t.Context(), l.StackConfig()); err != nil {
		t.Fatal(err)
	}

	return p
}

// installedPlugins maps the name of every plugin in PULUMI_HOME to its version.
func installedPlugins(t *testing.T, p *lab.Pulumi) map[string]string {
	t.Helper()

	var list []struct{ Name, Version string }
	if err := json.Unmarshal([]byte(mustRun(t, p, "plugin", "ls", "--json")), &list); err != nil {
		t.Fatal(err)
	}

	m := map[string]string{}
	for _, pl := range list {
		m[pl.Name] = pl.Version
	}

	return m
}

// checkPreview runs `pulumi preview` of the cluster and checks what the engine ran: the
// talos-proxmox plugin at the release's version (the one in PULUMI_HOME, which held no other),
// reporting that version itself, and the cluster's five VMs planned.
func checkPreview(t *testing.T, p *lab.Pulumi) {
	t.Helper()

	out, err := p.Run(t.Context(), "preview", "--json")
	if err != nil {
		t.Fatalf("preview: %v\n%s", err, out)
	}

	var preview struct {
		Steps []struct {
			NewState struct {
				Type   string         `json:"type"`
				Inputs map[string]any `json:"inputs"`
			} `json:"newState"`
		} `json:"steps"`
	}
	// The JSON document, without what the CLI printed to stderr before or after it.
	start := strings.Index(out, "{")
	if start < 0 {
		t.Fatalf("preview --json printed no JSON:\n%s", out)
	}

	if err := json.NewDecoder(strings.NewReader(out[start:])).Decode(&preview); err != nil {
		t.Fatalf("preview --json: %v\n%s", err, out)
	}

	var provider, cluster, vms int

	for _, s := range preview.Steps {
		switch s.NewState.Type {
		case "pulumi:providers:talos-proxmox":
			// The component's own provider for its lifecycle resources: registered by the plugin
			// with the version it reports.
			provider++
			if v := s.NewState.Inputs["version"]; v != releaseVersion {
				t.Errorf("the plugin registers its provider with version %v, want %s", v, releaseVersion)
			}
		case "talos-proxmox:index:TalosProxmoxCluster":
			cluster++
		case "proxmoxve:VM/virtualMachine:VirtualMachine":
			vms++
		}
	}

	if got := installedPlugins(t, p); got["talos-proxmox"] != releaseVersion || len(got) != 3 {
		t.Errorf("installed plugins after preview: %v, want talos-proxmox %s and the two children", got, releaseVersion)
	}

	if provider != 1 || cluster != 1 || vms != 5 {
		t.Errorf("preview plans %d talos-proxmox providers, %d clusters and %d VMs, want 1, 1 and 5:\n%s", provider, cluster, vms, out)
	}
}
