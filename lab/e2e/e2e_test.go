//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// env is a Pulumi environment isolated in a temporary directory: file backend, own
// PULUMI_HOME, no update checks, no plugin downloads.
type env struct {
	t       testing.TB
	bin     string
	plugin  string
	version string // of the plugin, from provider/VERSION
	dir     string
	home    string // PULUMI_HOME
	environ []string
}

func newEnv(t testing.TB) *env {
	t.Helper()

	bin, plugin, version := os.Getenv("PULUMI_TOOLCHAIN_BIN"), os.Getenv("TALOS_PROXMOX_PLUGIN"), os.Getenv("TALOS_PROXMOX_VERSION")
	if bin == "" || plugin == "" || version == "" {
		t.Fatal("PULUMI_TOOLCHAIN_BIN, TALOS_PROXMOX_PLUGIN and TALOS_PROXMOX_VERSION must be set: run `make e2e`")
	}

	tmp := t.TempDir()
	e := &env{t: t, bin: bin, plugin: plugin, version: version, dir: filepath.Join(tmp, "project"), home: filepath.Join(tmp, "home")}
	for _, d := range []string{e.dir, filepath.Join(tmp, "backend")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	e.environ = append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PULUMI_HOME="+e.home,
		// metadata=skip: the file backend writes no attributes sidecar next to each state file,
		// which it writes in place (truncate, then write) and a killed `up` can leave empty
		// (docs/operations.md, TestTornStateSidecar).
		"PULUMI_BACKEND_URL=file://"+filepath.Join(tmp, "backend")+"?metadata=skip",
		"PULUMI_CONFIG_PASSPHRASE=e2e",
		"PULUMI_SKIP_UPDATE_CHECK=1",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
	)

	if _, bench := t.(*testing.B); !bench {
		withoutAutomaticLog(t, e.home)
	}

	return e
}

// withoutAutomaticLog turns off, for a test's Pulumi home, Pulumi's automatic logging (on for
// every command since mid-2026): each command records every property it marshals, at debug
// level, into PULUMI_HOME/logs, gzip-compressed and encrypted, whatever -v says, and v3.259.0 has
// no switch for it. With the component's large configurations, turning it off saves 39 % of a
// no-op preview's CPU (docs/performance.md); the tests read none of it. The CLI logs nothing
// when it cannot create that directory, so logs is a link to /dev/null. Benchmarks keep it:
// they measure what a user's commands cost.
func withoutAutomaticLog(tb testing.TB, home string) {
	tb.Helper()

	if err := os.MkdirAll(home, 0o755); err != nil {
		tb.Fatal(err)
	}

	if err := os.Symlink(os.DevNull, filepath.Join(home, "logs")); err != nil {
		tb.Fatal(err)
	}
}

func (e *env) pulumi(args ...string) (string, error) {
	e.t.Helper()

	cmd := exec.Command(filepath.Join(e.bin, "pulumi"), append(args, "--non-interactive")...)
	cmd.Dir = e.dir
	cmd.Env = e.environ
	out, err := cmd.CombinedOutput()

	return string(out), err
}

// yamlProgram writes a YAML program using the plugin from its build directory.
func (e *env) yamlProgram(resources string) {
	e.t.Helper()

	text := "name: e2e\nruntime: yaml\nplugins:\n  providers:\n    - name: talos-proxmox\n      path: " +
		filepath.Dir(e.plugin) + "\nresources:\n" + resources
	if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), []byte(text), 0o644); err != nil {
		e.t.Fatal(err)
	}

	if out, err := e.pulumi("stack", "init", "dev"); err != nil {
		e.t.Fatalf("stack init: %v\n%s", err, out)
	}

	// Every program with the component has the proxmoxve plugin its children use (Pulumi installs
	// it on demand for users); the component's inventory check calls it at preview. Here it is the
	// lab's build, unconfigured: no Proxmox answers.
	for _, pl := range lab.Plugins(e.plugin, e.version, os.Getenv("TALOS_LAB_BIN")) {
		if pl.Name == "proxmoxve" {
			if out, err := e.pulumi("plugin", "install", "resource", pl.Name, pl.Version, "--file", pl.File); err != nil {
				e.t.Fatalf("installing the proxmoxve plugin: %v\n%s", err, out)
			}
		}
	}
}

// TestPluginSchemaIsCheckedIn: schema.json is what the built plugin serves.
func TestPluginSchemaIsCheckedIn(t *testing.T) {
	e := newEnv(t)

	out, err := exec.Command(filepath.Join(e.bin, "pulumi"), "package", "get-schema", e.plugin).Output()
	if err != nil {
		t.Fatalf("get-schema: %v", err)
	}

	var served, checkedIn map[string]any
	if err := json.Unmarshal(out, &served); err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile("../../schema.json")
	if err != nil {
		t.Fatal(err)
	}

	if err := json.Unmarshal(raw, &checkedIn); err != nil {
		t.Fatal(err)
	}

	if !reflect.DeepEqual(served, checkedIn) {
		t.Fatal("schema.json differs from the built plugin's schema: run `make schema`")
	}
}

const badCluster = `  cluster:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: homelab
      talosVersion: v1.11.5
      network:
        gateway: 10.0.0.1
      nodes:
        cp-1:
          hostNode: pve1
          role: controlplane
          ip: 10.0.0.11
          memoryMib: 1024
        worker-1:
          hostNode: pve1
          role: worker
          ip: 10.0.1.21
          dataDisks:
            - sizeGib: 50
              mountPath: var/lib/longhorn
`

// TestPreviewRejectsBadInput: validation runs inside the plugin during preview, reports every
// problem with its path, and creates nothing.
func TestPreviewRejectsBadInput(t *testing.T) {
	e := newEnv(t)
	e.yamlProgram(badCluster)

	out, err := e.pulumi("preview")
	if err == nil {
		t.Fatalf("preview succeeded:\n%s", out)
	}

	for _, want := range []string{
		"nodes.cp-1.memoryMib: 1024 is below the 2048 MiB a control plane needs",
		"nodes.worker-1.ip: 10.0.1.21 is outside the gateway's subnet 10.0.0.0/24",
		"nodes.worker-1.dataDisks[0].mountPath: \"var/lib/longhorn\" must be an absolute path",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("preview output lacks %q:\n%s", want, out)
		}
	}

	exported, err := e.pulumi("stack", "export")
	if err != nil {
		t.Fatalf("stack export: %v\n%s", err, exported)
	}

	if strings.Contains(exported, "proxmoxve:") || strings.Contains(exported, "talos:") {
		t.Errorf("state holds child resources after a failed preview:\n%s", exported)
	}
}

// TestPreviewNamesPlainProperty: a secret where the graph needs a plain value is refused with
// the property's name, not Go type names.
func TestPreviewNamesPlainProperty(t *testing.T) {
	e := newEnv(t)
	e.yamlProgram(`  cluster:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName:
        fn::secret: homelab
      talosVersion: v1.11.5
      network:
        gateway: 10.0.0.1
      nodes:
        cp-1:
          hostNode: pve1
          role: controlplane
          ip: 10.0.0.11
`)

	out, err := e.pulumi("preview")
	if err == nil {
		t.Fatalf("preview succeeded:\n%s", out)
	}

	if !strings.Contains(out, "clusterName: is a secret") {
		t.Errorf("preview output does not name clusterName:\n%s", out)
	}
}
