//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// The cluster a TalosProxmoxCluster adopts: made by hand with the proxmoxve and talos resources,
// as the Terraform modules make them (testdata/preview/adoptsource.go, `-program adoptsource`).

// adoptNodes are adoptsource's nodes: name → Proxmox host, role and the lab address index.
var adoptNodes = map[string]struct {
	host, role string
	address    int
}{
	"cp-1":     {"pve1", "controlplane", 11},
	"worker-1": {"pve2", "worker", 21},
	"worker-2": {"pve1", "worker", 22},
}

// adoptProof is the ConfigMap adoptSource writes into the cluster (namespace default), whose
// survival shows the cluster's etcd was kept.
var adoptProof = struct {
	name string
	data map[string]string
}{"adopt-proof", map[string]string{"k": "v"}}

// adoptSourceResult is the hand-written cluster right after its `up` and the ConfigMap write.
type adoptSourceResult struct {
	// VMIDs are the VM ids Proxmox chose, by node name (the program's vmIds output).
	VMIDs map[string]int
	// BootIDs are the nodes' boot ids, by node name (bootIDs).
	BootIDs map[string]string
	// Kubeconfig and Talosconfig are the program's outputs.
	Kubeconfig, Talosconfig string
	// MachineSecrets is the talos provider's machine secrets as JSON (camelCase, the Pulumi
	// shape secrets.bundle reads).
	MachineSecrets string
	// Counts are the lab's counters at that moment.
	Counts labCounts
}

// labCounts are what an adoption must leave unchanged on the lab's call logs.
type labCounts struct {
	// VMCreates and VMDeletes are the Proxmox calls POST /nodes/{node}/qemu and DELETE
	// /nodes/{node}/qemu/{vmid}, refused ones included.
	VMCreates, VMDeletes int
	// Downloads are the Proxmox calls POST /nodes/{node}/storage/{storage}/download-url.
	Downloads int
	// Applies are the ApplyConfiguration calls each node served, dry runs left out, whatever
	// their outcome; DryRunApplies the dry runs (previews ask them). By node (host)name; a VM
	// started again is a new node, counting from 0 (with a new boot id).
	Applies, DryRunApplies map[string]int
}

// countsOn reads the lab's counters now, applies by node (host)name.
func countsOn(t testing.TB, l *lab.Lab) labCounts {
	t.Helper()

	c := labCounts{
		VMCreates: l.PVE.CallCount("POST /nodes/{node}/qemu"),
		VMDeletes: l.PVE.CallCount("DELETE /nodes/{node}/qemu/{vmid}"),
		Downloads: l.PVE.CallCount("POST /nodes/{node}/storage/{storage}/download-url"),
		Applies:   map[string]int{}, DryRunApplies: map[string]int{},
	}

	for name, n := range labNodes(t, l) {
		c.Applies[name], c.DryRunApplies[name] = n.Applies(), n.DryRunApplies()
	}

	return c
}

// previewPrograms builds testdata/preview (the component, handwritten and adoptsource programs,
// run inline through the Automation API) and returns the binary.
func previewPrograms(tb testing.TB) string {
	tb.Helper()

	bin := filepath.Join(tb.TempDir(), "preview")
	build := exec.CommandContext(tb.Context(), "go", "build", "-o", bin, ".")
	build.Dir = repoPath(tb, "lab/e2e/testdata/preview")

	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("building the programs: %v\n%s", err, out)
	}

	return bin
}

// adoptSource makes the hand-written cluster on l: it runs adoptsource's `up` as project
// "adopt-source", stack "lab", in dir (created; its own project directory, in the Pulumi home
// and backend of p, whose plugins onLab installed), then writes the ConfigMap adoptProof through
// the kubeconfig output.
func adoptSource(t *testing.T, l *lab.Lab, p *lab.Pulumi, dir string) adoptSourceResult {
	t.Helper()

	bin := previewPrograms(t)

	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte("name: adopt-source\nruntime: go\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	src := &lab.Pulumi{Bin: p.Bin, Dir: dir, Env: p.Env}
	mustRun(t, src, "stack", "init", "lab")

	if err := src.SetConfig(t.Context(), l.StackConfig()); err != nil {
		t.Fatal(err)
	}

	up := exec.CommandContext(t.Context(), bin, "-program", "adoptsource", "-workdir", dir, "-stack", "lab", "up")
	up.Env = p.Env

	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("up of the hand-written cluster: %v\n%s", err, out)
	}

	var outputs struct {
		Kubeconfig     string         `json:"kubeconfig"`
		Talosconfig    string         `json:"talosconfig"`
		MachineSecrets string         `json:"machineSecrets"`
		VMIDs          map[string]int `json:"vmIds"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, src, "stack", "output", "--json", "--show-secrets")), &outputs); err != nil {
		t.Fatalf("the hand-written cluster's outputs: %v", err)
	}

	if !slices.Equal(slices.Sorted(maps.Keys(outputs.VMIDs)), slices.Sorted(maps.Keys(adoptNodes))) {
		t.Fatalf("the hand-written cluster's vmIds output is %v", outputs.VMIDs)
	}

	writeAdoptProof(t, outputs.Kubeconfig)

	return adoptSourceResult{
		VMIDs: outputs.VMIDs, BootIDs: bootIDs(t, l),
		Kubeconfig: outputs.Kubeconfig, Talosconfig: outputs.Talosconfig, MachineSecrets: outputs.MachineSecrets,
		Counts: countsOn(t, l),
	}
}

// writeAdoptProof writes the ConfigMap adoptProof, retrying while the API server behind the VIP
// comes up (the talos provider's kubeconfig does not wait for it).
func writeAdoptProof(t *testing.T, kubeconfig string) {
	t.Helper()

	kc := kubeClient(t, kubeconfig)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: adoptProof.name}, Data: adoptProof.data}

	var err error

	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err = kc.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		cancel()

		if err == nil || apierrors.IsAlreadyExists(err) {
			return
		}
	}

	t.Fatalf("writing the ConfigMap %s: %v", adoptProof.name, err)
}

// adoptProofKept fails the test unless adoptProof is in the cluster, unchanged, read through
// kubeconfig.
func adoptProofKept(t *testing.T, kubeconfig string) {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	cm, err := kubeClient(t, kubeconfig).CoreV1().ConfigMaps("default").Get(ctx, adoptProof.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap %s: %v", adoptProof.name, err)
	}

	if !maps.Equal(cm.Data, adoptProof.data) {
		t.Errorf("the ConfigMap %s holds %v, want %v", adoptProof.name, cm.Data, adoptProof.data)
	}
}

// adoptCiliumManifest is the Cilium manifest adoptsource bootstraps with (its inline manifest
// "cilium"), for the component's inlineManifests.
func adoptCiliumManifest(t testing.TB) string {
	t.Helper()

	b, err := os.ReadFile(repoPath(t, "lab/e2e/testdata/preview/adopt-cilium.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	return string(b)
}

// adoptComponentProgram is the TalosProxmoxCluster "adopt" that declares adoptsource's cluster, as
// a YAML program (project "adopt"); properties are more of its properties (e.g.
// "      secrets: {bundle: ${bundle}}\n"), at its properties' indent. It reads the Cilium manifest
// from the stack's config key ciliumManifest (adoptCiliumManifest; set it with the lab's stack
// configuration).
func adoptComponentProgram(l *lab.Lab, properties string) string {
	var nodes strings.Builder
	for _, name := range slices.Sorted(maps.Keys(adoptNodes)) {
		n := adoptNodes[name]
		fmt.Fprintf(&nodes, "        %s: {hostNode: %s, role: %s, ip: %s}\n", name, n.host, n.role, l.Address(n.address))
	}

	return fmt.Sprintf(`name: adopt
runtime: yaml
config:
  factoryUrl:
    type: string
  ciliumManifest:
    type: string
resources:
  adopt:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: adopt
      talosVersion: v1.11.5
      vip: %[1]s
      network:
        gateway: %[2]s
      image:
        factoryUrl: ${factoryUrl}
      inlineManifests:
        - name: cilium
          contents: ${ciliumManifest}
%[3]s      nodes:
%[4]soutputs:
  kubeconfig: ${adopt.kubeconfig}
  talosconfig: ${adopt.talosconfig}
`, l.Address(10), l.Address(1), properties, nodes.String())
}
