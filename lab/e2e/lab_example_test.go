//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// TestYAMLExampleOnTheLab runs examples/yaml, unchanged, through the real CLI, our plugin, the
// bridged bpg provider, the Proxmox VE fake and emulated Talos nodes: up; preview and refresh
// show no changes; destroy leaves the fake with no VM and no downloaded file. It runs against
// the Proxmox VE API schema of both releases the lab knows (every request and answer checked).
func TestYAMLExampleOnTheLab(t *testing.T) {
	t.Parallel()

	for _, v := range []struct {
		pve    string
		subnet int
	}{{"9", 3}, {"8.4", 5}} {
		t.Run("pve="+v.pve, func(t *testing.T) {
			t.Parallel() // its own lab (subnet), Pulumi home and backend

			yamlExample(t, lab.Options{Subnet: v.subnet, PVEVersion: v.pve})
		})
	}
}

func yamlExample(t *testing.T, opts lab.Options) {
	e := newEnv(t)

	program, err := os.ReadFile("../../examples/yaml/Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), program, 0o644); err != nil {
		t.Fatal(err)
	}

	l, p := onLab(t, e, opts, nil)
	ctx := t.Context()

	out, logs := upWithLogs(t, p, 8)
	noSecretLeaks(t, p, map[string]string{"the up's output": out, "the engine's and plugins' logs (-v=8)": logs})
	talosconfigUsesNodes(t, mustRun(t, p, "stack", "output", "talosconfig", "--show-secrets"), l)
	loopbackOnly(t)

	// The demo runs this program: a new user must see no warning to worry about (the example
	// spreads its control planes over three hosts; the lab's proxmoxve plugin warns about nothing
	// the published one does not).
	for line := range strings.Lines(out) {
		if strings.Contains(strings.ToLower(line), "warning") {
			t.Errorf("up printed a warning: %s", strings.TrimSpace(line))
		}
	}

	if vms := l.PVE.VMs(); len(vms) != 5 {
		t.Errorf("the fake has %d VMs, want 5", len(vms))
	}

	if nodes := l.Controller.Nodes(); len(nodes) != 5 {
		t.Errorf("%d emulated Talos nodes run, want 5", len(nodes))
	}

	for _, host := range []string{"pve1", "pve2", "pve3"} {
		if vols := l.PVE.Volumes(host, "local"); len(vols) != 1 || !strings.HasSuffix(vols[0].VolID, ".qcow2") {
			t.Errorf("%s has downloaded %v, want one qcow2 image", host, vols)
		}
	}

	out, err = p.Run(ctx, "stack", "output", "--json", "--show-secrets")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	var outputs struct {
		Endpoint, Kubeconfig string
		Nodes                map[string]struct {
			VMID int `json:"vmId"`
			IP   string
		}
	}
	if err := json.Unmarshal([]byte(out), &outputs); err != nil {
		t.Fatal(err)
	}

	if outputs.Endpoint != "https://"+l.Address(10)+":6443" || !strings.Contains(outputs.Kubeconfig, outputs.Endpoint) {
		t.Errorf("endpoint %q, kubeconfig:\n%s", outputs.Endpoint, outputs.Kubeconfig)
	}

	kubernetesFromOutput(t, outputs.Kubeconfig, len(outputs.Nodes))

	if n := outputs.Nodes["cp-1"]; n.IP != l.Address(11) || n.VMID < 100 {
		t.Errorf("nodes.cp-1 = %+v", n)
	}

	if out, err := p.Run(ctx, "preview", "--expect-no-changes", "--diff"); err != nil {
		t.Errorf("preview after up shows changes: %v\n%s", err, out)
	}

	helmPreview(t, p, filepath.Join(e.dir, "Pulumi.yaml"), string(program))

	exported, err := p.Run(ctx, "stack", "export")
	if err != nil {
		t.Fatal(err)
	}

	// Key material (base64 PEM in the talos schema: "-----BEGIN" is "LS0tLS1CRUdJTi"), the
	// bootstrap token, the kubeconfig and the talosconfig are all encrypted in the state.
	for _, plain := range []string{"LS0tLS1CRUdJTi", "BEGIN", "bootstrapToken\": \"", "certificate-authority-data", "client-key-data"} {
		if strings.Contains(exported, plain) {
			t.Errorf("the exported state holds %q in plaintext", plain)
		}
	}

	// The only configurations in plaintext are the redacted ones (certificates and keys as
	// fingerprints, which the checks above would otherwise find as base64 PEM).
	if !strings.Contains(exported, "crt: <redacted sha256:") {
		t.Error("the exported state holds no redacted configuration")
	}

	// The first refresh after create changes nothing: the bridged bpg provider reads an import
	// disk's `speed` block back differently from how it created it, but the component ignores
	// every disk's speed, and the engine applies ignoreChanges to a refresh's diff too.
	out, err = p.Run(ctx, "refresh", "--yes", "--skip-preview", "--diff")
	if err != nil {
		t.Fatalf("refresh: %v\n%s", err, out)
	}

	for _, line := range strings.Split(out, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "+ ") {
			t.Errorf("the first refresh changes the state: %q\n%s", l, out)
		}
	}

	if out, err := p.Run(ctx, "refresh", "--yes", "--expect-no-changes", "--skip-preview"); err != nil {
		t.Errorf("a second refresh shows changes: %v\n%s", err, out)
	}

	if out, err := p.Run(ctx, "preview", "--expect-no-changes", "--diff"); err != nil {
		t.Errorf("preview after refresh shows changes: %v\n%s", err, out)
	}

	if out, err := p.Run(ctx, "destroy", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}

	if vms := l.PVE.VMs(); len(vms) != 0 {
		t.Errorf("the fake still has VMs after destroy: %v", vms)
	}

	for _, host := range []string{"pve1", "pve2", "pve3"} {
		if vols := l.PVE.Volumes(host, "local"); len(vols) != 0 {
			t.Errorf("%s still holds %v after destroy", host, vols)
		}
	}
}

// TestBadInputOnTheLab: an invalid program fails at preview naming the property, and the
// Proxmox fake stays empty: the API sees only the inventory check's reads.
func TestBadInputOnTheLab(t *testing.T) {
	t.Parallel()

	e := newEnv(t)

	program, err := os.ReadFile("../../examples/yaml/Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}

	// storage-1's data disk gets a relative mount path.
	bad := strings.Replace(string(program), "mountPath: /var/lib/longhorn", "mountPath: var/lib/longhorn", 1)
	if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}

	l, p := onLab(t, e, lab.Options{Subnet: 4}, nil)
	ctx := t.Context()

	for _, cmd := range [][]string{{"preview"}, {"up", "--yes"}} {
		out, err := p.Run(ctx, cmd...)
		if err == nil || !strings.Contains(out, `nodes.storage-1.dataDisks[0].mountPath: "var/lib/longhorn" must be an absolute path`) {
			t.Errorf("%v: err %v, output lacks the property path:\n%s", cmd, err, out)
		}
	}

	if n := len(l.PVE.VMs()); n != 0 {
		t.Errorf("the fake has %d VMs after a rejected program", n)
	}

	// Only the inventory check's reads reach Proxmox (nodes, datastores, VMs, PCI mappings):
	// nothing is written.
	inventory := []string{"GET /nodes", "GET /nodes/{node}/storage", "GET /nodes/{node}/qemu", "GET /cluster/mapping/{type}", "GET /cluster/resources"}
	for route := range l.PVE.Calls() {
		if !slices.Contains(inventory, route) {
			t.Errorf("a rejected program called %s on the Proxmox API", route)
		}
	}
}

// helmPreview: Cilium is rendered at plan time, so a changed chart value shows in `pulumi
// preview` as an update of exactly the control planes' configuration applies (workers and VMs
// untouched, nothing replaced); a chart version the repository does not have fails the preview
// naming it; and the unchanged program, rendered again by a new plugin process, shows no change.
func helmPreview(t *testing.T, p *lab.Pulumi, file, program string) {
	t.Helper()

	ctx := t.Context()
	edit := func(from, to string) {
		t.Helper()

		if !strings.Contains(program, from) {
			t.Fatalf("the example no longer contains %q", from)
		}

		if err := os.WriteFile(file, []byte(strings.Replace(program, from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	edit("l2announcements:\n            enabled: true", "l2announcements:\n            enabled: false")

	out, err := p.Run(ctx, "preview", "--json")
	if err != nil {
		t.Fatalf("preview with a changed Cilium value: %v\n%s", err, out)
	}

	var plan struct {
		Steps []struct{ Op, URN string }
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	var changed []string

	for _, s := range plan.Steps {
		if s.Op == "same" {
			continue
		}

		name := s.URN[strings.LastIndex(s.URN, "::")+2:]
		changed = append(changed, s.Op+" "+name)
	}

	slices.Sort(changed)

	// The control planes' configurations change, the health gate runs again and the manifests
	// are synced; no node reboots (no NodeUpgrade changes).
	want := "update homelab-cp-1-node-config,update homelab-cp-2-node-config,update homelab-cp-3-node-config,update homelab-health,update homelab-manifests"
	if strings.Join(changed, ",") != want {
		t.Errorf("a changed Cilium value previews as %v, want %s", changed, want)
	}

	edit("version: 1.18.0", "version: 1.99.0")

	out, err = p.Run(ctx, "preview")
	if err == nil || !strings.Contains(out, `cilium: version "1.99.0" of chart "cilium" not found in repository`) {
		t.Errorf("preview of a missing chart version: %v\n%s", err, out)
	}

	if err := os.WriteFile(file, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}

	if out, err := p.Run(ctx, "preview", "--expect-no-changes"); err != nil {
		t.Errorf("preview of the unchanged program shows changes: %v\n%s", err, out)
	}
}
