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

// TestAutomationProgramOnTheLab runs examples/automation (the component in-process through the
// Automation API, no plugin) on the lab for two clusters at once, then through a full lifecycle:
// up with a private kubeconfig, preview and refresh with no changes, add a worker, remove it,
// destroy.
func TestAutomationProgramOnTheLab(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home, backend and scratch copies

	e := newEnv(t)

	bin := filepath.Join(t.TempDir(), "automation")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	build.Dir = repoPath(t, "examples/automation")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	project := "name: talos-homelab-automation\nruntime: go\n"
	if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}

	l, p := onLab(t, e, lab.Options{Subnet: 10}, nil)

	// A second cluster in the same lab, on its own addresses: stack "lab2".
	if out, err := p.Run(t.Context(), "stack", "init", "lab2"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	cfg := l.StackConfig()
	for k, v := range map[string]string{"vip": "127.0.10.110", "gateway": "127.0.10.1",
		"addresses": `["127.0.10.111","127.0.10.112","127.0.10.113","127.0.10.121","127.0.10.122"]`} {
		c := cfg[k]
		c.Value = v
		cfg[k] = c
	}

	if err := p.SetConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}

	automation := func(args ...string) string {
		t.Helper()

		cmd := exec.CommandContext(t.Context(), bin, append([]string{"-workdir", e.dir}, args...)...)
		cmd.Env = p.Env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("automation %v: %v\n%s", args, err, out)
		}

		return string(out)
	}

	out := automation("-stack", "lab", "-stack", "lab2", "up")
	if n := len(l.PVE.VMs()); n != 10 {
		t.Fatalf("two clusters need 10 VMs, the fake has %d:\n%s", n, out)
	}

	for _, stack := range []string{"lab", "lab2"} {
		st, err := os.Stat(filepath.Join(e.dir, stack+".kubeconfig"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s.kubeconfig: %v, mode %v; want it written with mode 0600", stack, err, st)
		}
	}

	automation("-stack", "lab2", "destroy")

	automation("-stack", "lab", "-expect-no-changes", "preview")
	automation("-stack", "lab", "-expect-no-changes", "refresh")

	p.Run(t.Context(), "stack", "select", "lab") //nolint:errcheck

	// A nameserver change: the program prints each node's redacted configuration diff from the
	// preview's events.
	mustRun(t, p, "config", "set", "--path", "nameservers[0]", "1.1.1.1")
	mustRun(t, p, "config", "set", "--path", "nameservers[1]", "8.8.8.8")

	preview := automation("-stack", "lab", "preview")
	if n := strings.Count(preview, "configuration of "); n != 5 || !regexp.MustCompile(`(?m)^-.*9\.9\.9\.9`).MatchString(preview) ||
		!regexp.MustCompile(`(?m)^\+.*8\.8\.8\.8`).MatchString(preview) {
		t.Errorf("the program printed %d configuration diffs, want 5 with the nameserver change:\n%s", n, preview)
	}

	mustRun(t, p, "config", "rm", "nameservers")
	mustRun(t, p, "config", "set", "--path", "workerAddresses[0]", l.Address(31))
	automation("-stack", "lab", "up")

	if n := len(l.PVE.VMs()); n != 6 {
		t.Errorf("after adding a worker the fake has %d VMs, want 6", n)
	}

	mustRun(t, p, "config", "rm", "workerAddresses")
	automation("-stack", "lab", "up")

	if n := len(l.PVE.VMs()); n != 5 {
		t.Errorf("after removing the worker the fake has %d VMs, want 5", n)
	}

	automation("-stack", "lab", "destroy")

	if vms := l.PVE.VMs(); len(vms) != 0 {
		t.Errorf("VMs left after destroying both clusters: %v", fmt.Sprint(len(vms)))
	}

	if !strings.Contains(out, "kubeconfig written to") {
		t.Errorf("up did not report where the kubeconfig went:\n%s", out)
	}
}
