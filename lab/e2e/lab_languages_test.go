//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// onLab starts a lab with opts and prepares a stack "lab" of the program in e.dir against it: the
// plugins, the stack, and the stack config that points the program at the lab. When program is
// set, its text is written to e.dir/Pulumi.yaml once the lab runs (it may use the lab's addresses).
func onLab(tb testing.TB, e *env, opts lab.Options, program func(*lab.Lab) string) (*lab.Lab, *lab.Pulumi) {
	tb.Helper()

	l, err := lab.Start(tb.Context(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Close)
	watchSchema(tb, l)

	if program != nil {
		if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), []byte(program(l)), 0o644); err != nil {
			tb.Fatal(err)
		}
	}

	p := &lab.Pulumi{Bin: e.bin, Dir: e.dir, Env: append(e.environ, "PULUMI_TALOS_LAB_TIMEOUT=1m")}
	useLabPlugins(tb, e)

	if out, err := p.Run(tb.Context(), "stack", "init", "lab"); err != nil {
		tb.Fatalf("%v\n%s", err, out)
	}

	if err := p.SetConfig(tb.Context(), l.StackConfig()); err != nil {
		tb.Fatal(err)
	}

	return l, p
}

// nameserverChange is the line the preview logs for a node whose nameservers change from
// 1.1.1.1, 9.9.9.9 to 1.1.1.1, 8.8.8.8 (the resolver document or the v1alpha1 field, by contract).
var nameserverChange = regexp.MustCompile(`: configuration changes: (ResolverConfig: \.nameservers|v1alpha1: \.machine\.network\.nameservers): ` +
	`\[.*1\.1\.1\.1.*9\.9\.9\.9.*\] → \[.*1\.1\.1\.1.*8\.8\.8\.8.*\]; applies live`)

// upPreviewDestroy runs the lifecycle every example must pass on the lab; logLevel is the
// verbosity of the up whose logs the secrets check reads (see upWithLogs).
//
// The two changes are previewed one after the other and applied by one up, as a user who changes
// two things at once would: the nameserver change alone applies live; with the Talos version
// change on top, every node is upgraded to the new image and then takes both.
func upPreviewDestroy(t *testing.T, l *lab.Lab, p *lab.Pulumi, logLevel int) {
	t.Helper()

	ctx := t.Context()

	out, logs := upWithLogs(t, p, logLevel)
	texts := map[string]string{"the up's output": out, fmt.Sprintf("the engine's and plugins' logs (-v=%d)", logLevel): logs}

	// A nameserver change: the preview shows every node's redacted configuration before and
	// after, live; none of it shows a secret.
	if err := p.SetConfig(ctx, map[string]lab.ConfigValue{"nameservers": {Value: `["1.1.1.1","8.8.8.8"]`}}); err != nil {
		t.Fatal(err)
	}

	configs, js := previewConfigs(t, p)
	texts["preview --json of a nameserver change"] = js

	if len(configs) != 5 {
		t.Errorf("the preview of a nameserver change updates %d node configurations, want 5: %v", len(configs), configs)
	}

	for name, c := range configs {
		msgs := strings.Join(c.Messages, "\n")
		if c.Op != "update" || !strings.Contains(c.Redacted, "9.9.9.9") || strings.Contains(c.RedactedAfter, "9.9.9.9") ||
			!strings.Contains(c.RedactedAfter, "8.8.8.8") || !nameserverChange.MatchString(msgs) {
			t.Errorf("%s: the preview of a nameserver change: %s %v, says %q; redacted configuration after:\n%s", name, c.Op, c.Diff, msgs, c.RedactedAfter)
		}
	}

	// A Talos version change on top: every node's installer image changes, and the preview says
	// each node reboots for it.
	if err := p.SetConfig(ctx, map[string]lab.ConfigValue{"talosVersion": {Value: "v1.14.1"}}); err != nil {
		t.Fatal(err)
	}

	texts["preview --diff of a nameserver and Talos version change"] = mustRun(t, p, "preview", "--diff")
	configs, js = previewConfigs(t, p)
	texts["preview --json of a nameserver and Talos version change"] = js

	if len(configs) != 5 {
		t.Errorf("the preview of a nameserver and Talos version change updates %d node configurations, want 5: %v", len(configs), configs)
	}

	for name, c := range configs {
		if msgs := strings.Join(c.Messages, "\n"); c.Op != "update" || !strings.Contains(msgs, "configuration changes: v1alpha1: .machine.install.image: ") ||
			!strings.Contains(msgs, "nameservers") || !strings.Contains(msgs, "reboots: the installer image changes to ") ||
			!strings.Contains(c.RedactedAfter, ":v1.14.1") || !strings.Contains(c.RedactedAfter, "8.8.8.8") || strings.Contains(c.RedactedAfter, "9.9.9.9") {
			t.Errorf("%s: the preview of a nameserver and Talos version change: %s, says %q", name, c.Op, msgs)
		}
	}

	texts["the up of a nameserver and Talos version change"] = mustRun(t, p, "up", "--yes", "--skip-preview")
	noSecretLeaks(t, p, texts)

	if n := len(l.PVE.VMs()); n != 5 {
		t.Errorf("the fake has %d VMs after up, want 5", n)
	}

	nodes := labNodes(t, l)
	if len(nodes) != 5 {
		t.Errorf("the lab runs %d Talos nodes after the up, want 5", len(nodes))
	}

	for name, n := range nodes {
		if cfg := string(n.Config()); !strings.Contains(cfg, "8.8.8.8") || !strings.Contains(cfg, ":v1.14.1") {
			t.Errorf("%s runs a configuration without the new nameserver or installer image after the up", name)
		}
	}

	if !strings.Contains(mustRun(t, p, "stack", "output", "endpoint"), l.Address(10)) {
		t.Error("the endpoint output is not the lab VIP")
	}

	if out, err := p.Run(ctx, "preview", "--expect-no-changes", "--diff"); err != nil {
		t.Errorf("preview after up shows changes: %v\n%s", err, out)
	}

	if out, err := p.Run(ctx, "destroy", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}

	if n := len(l.PVE.VMs()); n != 0 {
		t.Errorf("the fake has %d VMs after destroy", n)
	}
}

func mustRun(t *testing.T, p *lab.Pulumi, args ...string) string {
	t.Helper()

	out, err := p.Run(t.Context(), args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	return out
}

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()

	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// copyDir copies a program directory, leaving out build and dependency directories.
func copyDir(t *testing.T, from, to string) {
	t.Helper()

	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}

		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "bin", "venv", "__pycache__", "build":
				if rel != "." {
					return filepath.SkipDir
				}
			}

			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}

		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}

		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func repoPath(t testing.TB, rel string) string {
	t.Helper()

	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}

	return p
}

// TestGoExampleOnTheLab: examples/go through the Go language host and the generated Go SDK.
func TestGoExampleOnTheLab(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home, backend and scratch copies

	e := newEnv(t)
	copyDir(t, repoPath(t, "examples/go"), e.dir)

	mod, err := os.ReadFile(filepath.Join(e.dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}

	mod = []byte(strings.Replace(string(mod), "=> ../../sdk/go", "=> "+repoPath(t, "sdk/go"), 1))
	if err := os.WriteFile(filepath.Join(e.dir, "go.mod"), mod, 0o644); err != nil {
		t.Fatal(err)
	}

	l, p := onLab(t, e, lab.Options{Subnet: 6}, nil)

	upPreviewDestroy(t, l, p, 8)
}

// TestTypeScriptExampleOnTheLab: examples/typescript through the Node.js language host and the
// generated Node.js SDK, installed from a packed tarball as a user would get it.
func TestTypeScriptExampleOnTheLab(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home, backend and scratch copies

	e := newEnv(t)
	scratch := t.TempDir()

	sdk := filepath.Join(scratch, "sdk")
	copyDir(t, repoPath(t, "sdk/nodejs"), sdk)
	run(t, sdk, "npm", "install", "--no-audit", "--no-fund", "--no-save", "@pulumi/pulumi@3.259.0")
	run(t, sdk, "npx", "--no-install", "tsc")

	for _, f := range []string{"package.json", "README.md"} {
		data, _ := os.ReadFile(filepath.Join(sdk, f))
		if err := os.WriteFile(filepath.Join(sdk, "bin", f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	run(t, filepath.Join(sdk, "bin"), "npm", "pack", "--pack-destination", scratch)

	tarballs, _ := filepath.Glob(filepath.Join(scratch, "*.tgz"))
	if len(tarballs) != 1 {
		t.Fatalf("npm pack made %v", tarballs)
	}

	copyDir(t, repoPath(t, "examples/typescript"), e.dir)

	pkg, _ := os.ReadFile(filepath.Join(e.dir, "package.json"))
	pkg = []byte(strings.Replace(string(pkg), "file:../../sdk/nodejs/bin", "file:"+tarballs[0], 1))
	if err := os.WriteFile(filepath.Join(e.dir, "package.json"), pkg, 0o644); err != nil {
		t.Fatal(err)
	}

	run(t, e.dir, "npm", "install", "--no-audit", "--no-fund")

	l, p := onLab(t, e, lab.Options{Subnet: 7}, nil)
	upPreviewDestroy(t, l, p, 2)
}

// TestPythonExampleOnTheLab: examples/python through the Python language host, in a virtualenv
// with pulumi from PyPI and the generated SDK.
func TestPythonExampleOnTheLab(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home, backend and scratch copies

	e := newEnv(t)
	copyDir(t, repoPath(t, "examples/python"), e.dir)

	sdk := filepath.Join(t.TempDir(), "python")
	copyDir(t, repoPath(t, "sdk/python"), sdk)

	python := "python3"
	if v := os.Getenv("PYTHON"); v != "" {
		python = v
	}

	run(t, e.dir, python, "-m", "venv", "venv")
	run(t, e.dir, filepath.Join(e.dir, "venv", "bin", "pip"), "install", "--quiet", "--disable-pip-version-check", "pulumi==3.259.0", sdk)

	l, p := onLab(t, e, lab.Options{Subnet: 8}, nil)

	// The Python host of sdk v3.66 (the newest buildable here) runs the `python3` it finds on
	// PATH; put the virtualenv's first, as an activated virtualenv does.
	venv := filepath.Join(e.dir, "venv")
	p.Env = append(p.Env, "VIRTUAL_ENV="+venv, "PATH="+filepath.Join(venv, "bin")+string(os.PathListSeparator)+e.bin+
		string(os.PathListSeparator)+os.Getenv("PATH"))

	upPreviewDestroy(t, l, p, 2)
}
