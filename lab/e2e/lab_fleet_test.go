//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// fleetInventory is examples/fleet's inventory of three small clusters on the lab: alpha (a control
// plane and a worker), broken (its control plane on a Proxmox host the lab does not have) and
// bravo (one control plane). Only the Proxmox endpoint, the factory and the addresses are the
// lab's; the API token comes from PROXMOX_VE_API_TOKEN.
func fleetInventory(l *lab.Lab, clusters ...string) string {
	all := map[string]string{
		"alpha": fmt.Sprintf(`  - name: alpha
    nodes:
      cp-1: {hostNode: pve1, role: controlplane, ip: %s}
      worker-1: {hostNode: pve2, role: worker, ip: %s}
`, l.Address(11), l.Address(21)),
		"broken": fmt.Sprintf(`  - name: broken
    nodes:
      cp-1: {hostNode: pve9, role: controlplane, ip: %s}
`, l.Address(13)),
		"bravo": fmt.Sprintf(`  - name: bravo
    nodes:
      cp-1: {hostNode: pve3, role: controlplane, ip: %s}
`, l.Address(12)),
	}

	text := fmt.Sprintf(`defaults:
  talosVersion: v1.11.5
  proxmox: {endpoint: %q, insecure: true}
  network: {gateway: %s, prefixLength: 24}
  image: {factoryUrl: %q}
clusters:
`, l.PVE.URL(), l.Address(1), l.Factory.URL())
	for _, c := range clusters {
		text += all[c]
	}

	return text
}

// TestFleetOnTheLab runs examples/fleet (the Automation API, the component in-process) on the lab
// with three clusters, two at a time, one of which fails: the other two are built, the summary
// names the failure with its cause and the exit status is 1. A preview of the two good clusters
// then finds nothing to change, and a destroy of all three leaves no VM.
func TestFleetOnTheLab(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home, backend and work directory

	e := newEnv(t)

	bin := filepath.Join(t.TempDir(), "fleet")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	build.Dir = repoPath(t, "examples/fleet")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	l, err := lab.Start(t.Context(), lab.Options{Subnet: 58})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	watchSchema(t, l)

	// The component runs inside the fleet program; its lifecycle resources (upgrades, health gate)
	// are served by the talos-proxmox plugin, as for the Automation API example.
	p := &lab.Pulumi{Bin: e.bin, Dir: e.dir, Env: append(e.environ, "PULUMI_TALOS_LAB_TIMEOUT=1m",
		"PROXMOX_VE_API_TOKEN="+l.APIToken())}
	useLabPlugins(t, e)

	fleet := func(inventory string, args ...string) (string, int) {
		t.Helper()

		path := filepath.Join(e.dir, "fleet.yaml")
		if err := os.WriteFile(path, []byte(inventory), 0o644); err != nil {
			t.Fatal(err)
		}

		cmd := exec.CommandContext(t.Context(), bin, append([]string{"-inventory", path, "-workdir", e.dir}, args...)...)
		cmd.Env = p.Env
		out, err := cmd.CombinedOutput()

		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("fleet %v: %v\n%s", args, err, out)
		}

		t.Logf("fleet %v:\n%s", args, summaryOf(string(out)))

		return string(out), cmd.ProcessState.ExitCode()
	}

	out, code := fleet(fleetInventory(l, "alpha", "broken", "bravo"), "-parallel", "2")
	if code != 1 {
		t.Errorf("fleet up with a broken cluster exited %d, want 1:\n%s", code, out)
	}

	for _, want := range []string{
		`(?m)^fleet: up of 3 clusters, 2 at a time$`,
		`(?m)^\[alpha\] .*TalosProxmoxCluster`, // the CLI's progress, prefixed
		`(?m)^\[bravo\] done in `,
		`(?m)^\[broken\] failed after `,
		`(?m)^alpha\s+ok\s+\S+\s+create=\d+\s+https://` + regexp.QuoteMeta(l.Address(11)) + `:6443\s*$`,
		`(?m)^bravo\s+ok\s+\S+\s+create=\d+\s+https://` + regexp.QuoteMeta(l.Address(12)) + `:6443\s*$`,
		`(?m)^broken\s+failed\s+\S+\s+-\s+-\s+.*pve9`,
		`(?m)^1 of 3 clusters failed$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the fleet's output does not match %s:\n%s", want, out)
		}
	}

	if n := len(l.PVE.VMs()); n != 3 {
		t.Errorf("the fake has %d VMs, want 3 (alpha's two, bravo's one)", n)
	}

	out, code = fleet(fleetInventory(l, "alpha", "bravo"), "-action", "preview", "-expect-no-changes")
	if code != 0 || !regexp.MustCompile(`(?m)^bravo\s+ok\s+\S+\s+same=\d+\s+https://`).MatchString(out) {
		t.Errorf("a preview of the built clusters (exit %d) is not clean:\n%s", code, out)
	}

	out, code = fleet(fleetInventory(l, "alpha", "broken", "bravo"), "-action", "destroy", "-parallel", "3")
	if code != 0 || !strings.Contains(out, "0 of 3 clusters failed") {
		t.Errorf("destroy (exit %d):\n%s", code, out)
	}

	if n := len(l.PVE.VMs()); n != 0 {
		t.Errorf("the fake has %d VMs after the fleet's destroy", n)
	}
}

// summaryOf is the fleet's output from its summary on.
func summaryOf(out string) string {
	if i := strings.Index(out, "\nCLUSTER"); i >= 0 {
		return out[i+1:]
	}

	return out
}
