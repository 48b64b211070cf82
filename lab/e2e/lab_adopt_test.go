//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// secretsBundle is the component's secrets input read from the stack's secret config key bundle.
// Pulumi YAML reads a config value that is JSON as an object, so fn::toJSON gives it back as the
// text secrets.bundle takes (docs/adopt.md says so).
const secretsBundle = "      secrets:\n        bundle:\n          fn::toJSON: ${bundle}\n"

// onAdoptLab starts a lab with opts and the component program adoptComponentProgram(l, "") as
// stack "lab" in e, with the Cilium manifest in its config and the secret config key bundle
// declared (set it before the program uses it).
func onAdoptLab(t *testing.T, e *env, opts lab.Options) (*lab.Lab, *lab.Pulumi) {
	t.Helper()

	l, p := onLab(t, e, opts, func(l *lab.Lab) string { return adoptComponentProgram(l, "") })
	if err := p.SetConfig(t.Context(), map[string]lab.ConfigValue{"ciliumManifest": {Value: adoptCiliumManifest(t)}}); err != nil {
		t.Fatal(err)
	}

	editProgram(t, e, "config:\n", "config:\n  bundle:\n    type: string\n    secret: true\n")

	return l, p
}

// adopt points the component program at the hand-written cluster's secrets.
func adopt(t *testing.T, e *env, p *lab.Pulumi, bundle string) {
	t.Helper()

	mustRun(t, p, "config", "set", "--secret", "bundle", bundle)
	editProgram(t, e, "      nodes:\n", secretsBundle+"      nodes:\n")
}

// TestAdoptAClusterMadeByHand: a cluster made by a hand-written program with the proxmoxve and
// talos resources only (the way the Terraform modules make it: its own resource names, VM ids from
// Proxmox' nextid, its own secrets, Cilium as an inline manifest), holding a ConfigMap, is taken
// over by a TalosProxmoxCluster given its secrets and the same nodes. The preview shows every VM
// imported and no VM created, replaced or deleted, and no reboot; the `up` creates and deletes no
// VM and applies no configuration on the lab's call log; every node keeps its boot id; the
// ConfigMap is still there, read through the component's kubeconfig; the next preview shows no
// change. The Talos images the program downloaded are reused: nothing is downloaded, also not
// for a worker added then, which joins the cluster. A VM whose tags the old tool applies again is tagged again in place, not imported over
// itself. Then the adopted cluster is upgraded (Talos v1.11.5 → v1.11.6) and loses a worker; a
// declaration that drops secrets.bundle is refused.
func TestAdoptAClusterMadeByHand(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onAdoptLab(t, e, lab.Options{Subnet: 41})
	src := adoptSource(t, l, p, filepath.Join(t.TempDir(), "source"))

	adopt(t, e, p, src.MachineSecrets)

	preview := mustRun(t, p, "preview", "--diff")
	for _, name := range slices.Sorted(maps.Keys(adoptNodes)) {
		n := adoptNodes[name]
		if want := fmt.Sprintf("%s: adopting VM %d on %s (Talos v1.11.5): imported as it is\n", name, src.VMIDs[name], n.host); !strings.Contains(preview, want) {
			t.Errorf("the preview does not say %q:\n%s", want, preview)
		}

		if want := name + ": adopted: runs the declared configuration already; nothing will be applied"; !strings.Contains(preview, want) {
			t.Errorf("the preview does not say %q", want)
		}
	}

	if strings.Contains(preview, "reboot") {
		t.Errorf("the preview of an adoption speaks of a reboot:\n%s", preview)
	}

	// The VMs are imported; the Talos images the hand-written program downloaded are the
	// cluster's: reused, not downloaded again.
	steps := previewSteps(t, p, vmType, fileType)
	for name := range adoptNodes {
		if ops := steps["adopt-"+name]; !slices.Contains(ops, "import") || slices.ContainsFunc(ops, func(op string) bool { return op != "import" && op != "update" }) {
			t.Errorf("the preview's steps of %s's VM are %v, want an import (and the update of its tags) only", name, ops)
		}
	}

	if len(steps) != len(adoptNodes) {
		t.Errorf("the preview has VM and image download steps %v, want the VMs' only", steps)
	}

	for _, host := range []string{"pve1", "pve2"} {
		if want := regexp.MustCompile(`image: ` + host + ` reuses the Talos image local:import/adopt-[0-9a-f]{64}-v1\.11\.5-nocloud-amd64\.qcow2 already there`); !want.MatchString(preview) {
			t.Errorf("the preview does not say %s", want)
		}
	}

	mustRun(t, p, "up", "--yes", "--skip-preview")

	after := countsOn(t, l)
	if after.VMCreates != src.Counts.VMCreates || after.VMDeletes != src.Counts.VMDeletes || after.Downloads != src.Counts.Downloads {
		t.Errorf("the adoption created %d and deleted %d VMs and downloaded %d images", after.VMCreates-src.Counts.VMCreates,
			after.VMDeletes-src.Counts.VMDeletes, after.Downloads-src.Counts.Downloads)
	}

	if !maps.Equal(after.Applies, src.Counts.Applies) {
		t.Errorf("configuration applies by node: %v before the adoption, %v after", src.Counts.Applies, after.Applies)
	}

	if boots := bootIDs(t, l); !maps.Equal(boots, src.BootIDs) {
		t.Errorf("boot ids changed: %v before the adoption, %v after", src.BootIDs, boots)
	}

	kubeconfig := mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets")
	adoptProofKept(t, kubeconfig)
	mustRun(t, p, "preview", "--expect-no-changes")

	for _, vm := range l.PVE.VMs() {
		if !slices.Contains(strings.Split(vm.Config["tags"], ";"), "talos-adopted") {
			t.Errorf("VM %d (%s) is not tagged talos-adopted: %s", vm.VMID, vm.Name, vm.Config["tags"])
		}
	}

	// A node added to the adopted cluster is made from the image already on its host (nothing is
	// downloaded), joins the cluster and runs that image's Talos.
	editProgram(t, e, "      nodes:\n", fmt.Sprintf("      nodes:\n        worker-3: {hostNode: pve2, role: worker, ip: %s}\n", l.Address(23)))
	mustRun(t, p, "up", "--yes", "--skip-preview")

	if c := countsOn(t, l); c.Downloads != after.Downloads || c.VMCreates != after.VMCreates+1 || c.VMDeletes != after.VMDeletes {
		t.Errorf("adding worker-3 downloaded %d images, created %d VMs and deleted %d, want 0, 1 and 0", c.Downloads-after.Downloads,
			c.VMCreates-after.VMCreates, c.VMDeletes-after.VMDeletes)
	}

	if w3, ok := labNodes(t, l)["worker-3"]; !ok || w3.Running().Version != "v1.11.5" {
		t.Errorf("worker-3 (there: %v) does not run Talos v1.11.5, the image on pve2", ok)
	}

	if err := readyNodes(t.Context(), kubeClient(t, kubeconfig), 4); err != nil {
		t.Errorf("after worker-3 was added: %v", err)
	}

	// Day 2 on the adopted cluster: a Talos upgrade, node by node, then a worker leaves.
	setTalosVersion(t, e, "v1.11.5", "v1.11.6")
	mustRun(t, p, "up", "--yes", "--skip-preview")

	// No host has a v1.11.6 image: the component downloads its own to each, for the VMs it
	// makes from now on.
	if n := countsOn(t, l).Downloads - after.Downloads; n != 2 {
		t.Errorf("the upgrade to v1.11.6 downloaded %d images, want one per host (2)", n)
	}

	for name, n := range labNodes(t, l) {
		if v := n.Running().Version; v != "v1.11.6" {
			t.Errorf("%s runs %s after the upgrade, want v1.11.6", name, v)
		}
	}

	upgraded := bootIDs(t, l)

	// The old tool applies its own tags again (it still thinks it owns the VM), after an up that
	// did not import anything: the next up tags it again in place, and neither imports it a
	// second time over the VM in the state (which would delete it) nor replaces it.
	retag(t, l, "worker-1", "kubernetes;talos")

	before := countsOn(t, l)
	mustRun(t, p, "up", "--yes", "--skip-preview")

	if c := countsOn(t, l); c.VMCreates != before.VMCreates || c.VMDeletes != before.VMDeletes {
		t.Errorf("the up after worker-1 lost its tags created %d and deleted %d VMs", c.VMCreates-before.VMCreates, c.VMDeletes-before.VMDeletes)
	}

	if tags := vmOf(l, "worker-1").Config["tags"]; !strings.Contains(tags, "talos-adopted") {
		t.Errorf("worker-1's tags after the up: %s", tags)
	}

	if boots := bootIDs(t, l); !maps.Equal(boots, upgraded) {
		t.Errorf("boot ids changed: %v after the upgrade, %v after worker-1 was tagged again", upgraded, boots)
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	editProgram(t, e, fmt.Sprintf("        worker-2: {hostNode: pve1, role: worker, ip: %s}\n", l.Address(22)), "")
	mustRun(t, p, "up", "--yes", "--skip-preview")

	if slices.Contains(vmNames(l), "worker-2") {
		t.Error("worker-2's VM is still there after its removal")
	}

	if err := readyNodes(t.Context(), kubeClient(t, kubeconfig), 3); err != nil {
		t.Errorf("after worker-2's removal: %v", err)
	}

	adoptProofKept(t, kubeconfig)
	mustRun(t, p, "preview", "--expect-no-changes")

	// Without its bundle the component would generate new secrets: refused.
	editProgram(t, e, secretsBundle, "")

	if out, err := p.Run(t.Context(), "preview"); err == nil || !strings.Contains(out, "secrets.bundle: this cluster was adopted with its secrets bundle") {
		t.Errorf("the preview without secrets.bundle: %v\n%s", err, out)
	}
}

// TestAdoptionIsCheckedAndShowsDifferences: an adoption given another cluster's secrets is
// refused at preview, saying the cluster's CA does not match, with nothing changed. With the
// cluster's own secrets and one declared difference of a VM (worker-1's memory), the preview shows
// that difference and what it does (an update in place, a reboot by the proxmoxve provider), and
// one of a configuration (a sysctl on worker-2), redacted, applied live. The `up` changes just
// those: worker-1's VM (rebooted) and worker-2's configuration (applied once, no reboot); cp-1
// is untouched.
func TestAdoptionIsCheckedAndShowsDifferences(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onAdoptLab(t, e, lab.Options{Subnet: 42})
	src := adoptSource(t, l, p, filepath.Join(t.TempDir(), "source"))

	adopt(t, e, p, otherBundle(t))

	out, err := p.Run(t.Context(), "preview")
	if err == nil || !strings.Contains(out, "secrets.bundle: the cluster's CA does not match: node ") {
		t.Errorf("the preview of another cluster's secrets: %v\n%s", err, out)
	}

	out, err = p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err == nil || !strings.Contains(out, "the cluster's CA does not match") {
		t.Errorf("the up of another cluster's secrets: %v\n%s", err, out)
	}

	if c := countsOn(t, l); c.VMCreates != src.Counts.VMCreates || c.VMDeletes != src.Counts.VMDeletes || !maps.Equal(c.Applies, src.Counts.Applies) {
		t.Errorf("a refused adoption changed the lab: %+v, before %+v", c, src.Counts)
	}

	mustRun(t, p, "config", "set", "--secret", "bundle", src.MachineSecrets)
	editProgram(t, e, fmt.Sprintf("worker-1: {hostNode: pve2, role: worker, ip: %s}", l.Address(21)),
		fmt.Sprintf("worker-1: {hostNode: pve2, role: worker, ip: %s, memoryMib: 6144}", l.Address(21)))
	editProgram(t, e, fmt.Sprintf("worker-2: {hostNode: pve1, role: worker, ip: %s}", l.Address(22)),
		fmt.Sprintf(`worker-2: {hostNode: pve1, role: worker, ip: %s, configPatches: ['{"machine": {"sysctls": {"vm.max_map_count": "262144"}}}']}`, l.Address(22)))

	preview := mustRun(t, p, "preview", "--diff")

	want := fmt.Sprintf("worker-1: adopting VM %d on pve2 (Talos v1.11.5): imported as it is; then changed as declared: "+
		"memory 4096 → 6144 MiB (in place; the VM is rebooted by the proxmoxve provider to apply it)\n", src.VMIDs["worker-1"])
	if !strings.Contains(preview, want) {
		t.Errorf("the preview does not say %q:\n%s", want, preview)
	}

	if n := len(regexp.MustCompile(`then changed as declared`).FindAllString(preview, -1)); n != 1 {
		t.Errorf("the preview names changes of %d VMs, want 1", n)
	}

	// worker-2's configuration differs: the preview shows what changes (redacted) and how it
	// applies; the others run theirs already.
	if want := `worker-2: adopted: configuration changes: v1alpha1: .machine.sysctls: (none) → {vm.max_map_count: "262144"}; applies live`; !strings.Contains(preview, want) {
		t.Errorf("the preview does not say %q:\n%s", want, preview)
	}

	for _, name := range []string{"cp-1", "worker-1"} {
		if want := name + ": adopted: runs the declared configuration already; nothing will be applied"; !strings.Contains(preview, want) {
			t.Errorf("the preview does not say %q", want)
		}
	}

	if !regexp.MustCompile(`(?s)adopt-worker-1]\n.*?~ memory\s*: \{\n\s*~ dedicated: 4096 => 6144`).MatchString(preview) {
		t.Errorf("the preview's diff of worker-1's VM does not show its memory:\n%s", preview)
	}

	mustRun(t, p, "up", "--yes", "--skip-preview")

	if vm := vmOf(l, "worker-1"); vm.Config["memory"] != "6144" {
		t.Errorf("worker-1's VM has %s MiB after the up, want 6144", vm.Config["memory"])
	}

	boots := bootIDs(t, l)
	for name := range adoptNodes {
		if changed := boots[name] != src.BootIDs[name]; changed != (name == "worker-1") {
			t.Errorf("%s's boot id changed: %v (only worker-1's VM is rebooted, by the proxmoxve provider)", name, changed)
		}
	}

	// worker-1's VM started again (a new emulated node, counting from 0) and was not
	// configured; worker-2 was configured once, live.
	if c := countsOn(t, l); c.VMCreates != src.Counts.VMCreates || c.VMDeletes != src.Counts.VMDeletes ||
		c.Applies["cp-1"] != src.Counts.Applies["cp-1"] || c.Applies["worker-2"] != src.Counts.Applies["worker-2"]+1 || c.Applies["worker-1"] != 0 {
		t.Errorf("the adoption with a memory change: %+v, before %+v", c, src.Counts)
	}

	if !strings.Contains(string(labNodes(t, l)["worker-2"].Config()), "vm.max_map_count") {
		t.Error("worker-2 does not run the declared sysctl")
	}

	adoptProofKept(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	mustRun(t, p, "preview", "--expect-no-changes")
}

// otherBundle is a secrets bundle of another cluster, as `talosctl gen secrets` writes it.
func otherBundle(t *testing.T) string {
	t.Helper()

	b, err := secrets.NewBundle(secrets.NewFixedClock(time.Now()), config.TalosVersion1_11)
	if err != nil {
		t.Fatal(err)
	}

	out, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}

	return string(out)
}

// previewSteps runs `pulumi preview --json` once and returns, for the resources of types, the
// operations of their steps (same left out) by resource name.
func previewSteps(t *testing.T, p *lab.Pulumi, types ...string) map[string][]string {
	t.Helper()

	steps := map[string][]string{}

	for _, changes := range previewChanges(t, p, types...) {
		for _, s := range changes {
			op, name, _ := strings.Cut(s, " ")
			steps[name] = append(steps[name], op)
		}
	}

	return steps
}

// retag sets a VM's tags through the Proxmox API, as another tool would.
func retag(t *testing.T, l *lab.Lab, name, tags string) {
	t.Helper()

	vm := vmOf(l, name)
	form := url.Values{"tags": {tags}}
	req := httptest.NewRequest(http.MethodPut, fmt.Sprintf("/api2/json/nodes/%s/qemu/%d/config", vm.Node, vm.VMID), strings.NewReader(form.Encode()))
	req.Header.Set("Authorization", "PVEAPIToken="+l.APIToken())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")

	w := httptest.NewRecorder()
	l.PVE.ServeHTTP(w, req)

	if w.Code != http.StatusOK {
		t.Fatalf("tagging %s: %d %s", name, w.Code, w.Body)
	}
}
