//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// taintsProgram is a cluster of one control plane and two workers with taints: one for every node
// (nodeDefaults) and worker-1's own, control planes not schedulable; worker-2, alone on pve3,
// runs its own image (its own extensions) and the NVIDIA GPU preset, over a passed-through GPU, with
// NVIDIA's device plugin chart (from the lab's chart repository).
func taintsProgram(l *lab.Lab) string {
	return fmt.Sprintf(`name: taints
runtime: yaml
config:
  factoryUrl:
    type: string
  ciliumRepository:
    type: string
resources:
  taints:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: taints
      talosVersion: v1.11.5
      allowSchedulingOnControlPlanes: false
      nvidiaDevicePlugin:
        repository: ${ciliumRepository}
      network:
        gateway: %[1]s
      image:
        factoryUrl: ${factoryUrl}
      nodeDefaults:
        taints: ["example.com/pool=home:PreferNoSchedule"]
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[2]s}
        worker-1: {hostNode: pve2, role: worker, ip: %[3]s, taints: ["dedicated=storage:NoSchedule"]}
        worker-2: {hostNode: pve3, role: worker, ip: %[4]s, image: {extensions: [siderolabs/qemu-guest-agent, siderolabs/iscsi-tools]},
          gpu: nvidia, pciDevices: [{mapping: gpu}]}
outputs:
  kubeconfig: ${taints.kubeconfig}
  talosconfig: ${taints.talosconfig}
  schematicId: ${taints.schematicId}
`, l.Address(1), l.Address(11), l.Address(21), l.Address(22))
}

// TestNodeTaintsSchedulingAndImages: declared taints (nodeDefaults' and a node's own) and the
// control-plane taint of allowSchedulingOnControlPlanes: false reach the Nodes as Talos sets them.
// Allowing scheduling on control planes and changing the taints is previewed as configuration
// changes that apply live: after the `up` the control plane's Node has lost its NoSchedule taint,
// the worker's has its new taint and not the removed ones, and no node rebooted. Disallowing it
// again taints the control plane again, live; the preview after is clean.
//
// worker-2's own image: only its host (pve3) downloads it, and only it; it runs that image's
// schematic (its extensions and the NVIDIA ones), the others the cluster's; its configuration
// loads the NVIDIA kernel modules and the cluster has the nvidia RuntimeClass. A Talos upgrade rolls each node to its own image of the
// new version; changing only worker-2's image upgrades only worker-2.
func TestNodeTaintsSchedulingAndImages(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 66}, taintsProgram)

	mustRun(t, p, "up", "--yes", "--skip-preview")

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	controlPlaneTaint := "node-role.kubernetes.io/control-plane:NoSchedule"

	wantNodeTaints(t, kc, map[string][]string{
		"cp-1":     {"example.com/pool=home:PreferNoSchedule", controlPlaneTaint},
		"worker-1": {"dedicated=storage:NoSchedule", "example.com/pool=home:PreferNoSchedule"},
	})

	clusterSchematic := strings.TrimSpace(mustRun(t, p, "stack", "output", "schematicId"))
	own := runningImages(t, l, "v1.11.5", clusterSchematic, "worker-2")
	wantImageFiles(t, l, map[string][]string{
		"pve1": {"v1.11.5-" + clusterSchematic[:16]}, "pve2": {"v1.11.5-" + clusterSchematic[:16]}, "pve3": {"v1.11.5-" + own[:16]},
	})

	wantGPUNode(t, p, kc, l.Address(22), own)

	boots := bootIDs(t, l)

	editProgram(t, e, "allowSchedulingOnControlPlanes: false", "allowSchedulingOnControlPlanes: true")
	editProgram(t, e, "      nodeDefaults:\n        taints: [\"example.com/pool=home:PreferNoSchedule\"]\n", "")
	editProgram(t, e, `taints: ["dedicated=storage:NoSchedule"]`, `taints: ["dedicated=gpu:NoExecute"]`)

	preview := mustRun(t, p, "preview", "--diff")
	for node, change := range map[string]string{
		"cp-1":     ".cluster.allowSchedulingOnControlPlanes: false → true",
		"worker-1": ".machine.nodeTaints",
	} {
		if !regexp.MustCompile(`(?m)` + node + `: configuration changes: .*` + regexp.QuoteMeta(change) + `.*; applies live$`).MatchString(preview) {
			t.Errorf("the preview does not say %s's configuration change %q applies live:\n%s", node, change, preview)
		}
	}

	if strings.Contains(preview, "reboot") {
		t.Errorf("the preview of taint changes speaks of a reboot:\n%s", preview)
	}

	mustRun(t, p, "up", "--yes", "--skip-preview")

	wantNodeTaints(t, kc, map[string][]string{"cp-1": nil, "worker-1": {"dedicated=gpu:NoExecute"}})

	editProgram(t, e, "allowSchedulingOnControlPlanes: true", "allowSchedulingOnControlPlanes: false")
	mustRun(t, p, "up", "--yes", "--skip-preview")

	wantNodeTaints(t, kc, map[string][]string{"cp-1": {controlPlaneTaint}, "worker-1": {"dedicated=gpu:NoExecute"}})

	if after := bootIDs(t, l); !maps.Equal(after, boots) {
		t.Errorf("boot ids changed: %v before the taint changes, %v after", boots, after)
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	// A Talos upgrade: each node to its own image of v1.11.6.
	setTalosVersion(t, e, "v1.11.5", "v1.11.6")
	mustRun(t, p, "up", "--yes", "--skip-preview")
	runningImages(t, l, "v1.11.6", clusterSchematic, "worker-2")

	// Only worker-2's image changes: only worker-2 is upgraded.
	upgraded := bootIDs(t, l)

	editProgram(t, e, "image: {extensions: [siderolabs/qemu-guest-agent, siderolabs/iscsi-tools]}",
		"image: {extensions: [siderolabs/qemu-guest-agent, siderolabs/iscsi-tools, siderolabs/util-linux-tools]}")

	if got := previewUpdates(t, p, nodeUpgradeType); !slices.Equal(got, []string{"update taints-worker-2-upgrade"}) {
		t.Errorf("the preview of worker-2's new image updates the upgrades %v, want worker-2's only", got)
	}

	mustRun(t, p, "up", "--yes", "--skip-preview")

	if again := runningImages(t, l, "v1.11.6", clusterSchematic, "worker-2"); again == own {
		t.Errorf("worker-2 still runs schematic %s after its image changed", own)
	}

	for name, id := range bootIDs(t, l) {
		if changed := id != upgraded[name]; changed != (name == "worker-2") {
			t.Errorf("%s's boot id changed: %v (only worker-2 should have rebooted)", name, changed)
		}
	}

	mustRun(t, p, "preview", "--expect-no-changes")
}

// runningImages checks that every node runs Talos version with the cluster's schematic, except
// own, which runs another; it returns own's schematic.
func runningImages(t *testing.T, l *lab.Lab, version, cluster, own string) string {
	t.Helper()

	var schematic string

	for name, n := range labNodes(t, l) {
		r := n.Running()

		switch {
		case r.Version != version:
			t.Errorf("%s runs Talos %s, want %s", name, r.Version, version)
		case name == own && r.Schematic == cluster:
			t.Errorf("%s runs the cluster's schematic, not its own image's", name)
		case name != own && r.Schematic != cluster:
			t.Errorf("%s runs schematic %s, not the cluster's %s", name, r.Schematic, cluster)
		}

		if name == own {
			schematic = r.Schematic
		}
	}

	if len(schematic) < 16 {
		t.Fatalf("%s runs no schematic", own)
	}

	return schematic
}

// wantImageFiles checks that each host's image datastore (local) holds exactly the Talos images
// named (each by a part of its file name: version and schematic).
func wantImageFiles(t *testing.T, l *lab.Lab, want map[string][]string) {
	t.Helper()

	for host, parts := range want {
		var files []string

		for _, v := range l.PVE.Volumes(host, "local") {
			if v.Content == "import" || v.Content == "iso" {
				files = append(files, v.VolID)
			}
		}

		if len(files) != len(parts) {
			t.Errorf("%s holds the images %v, want %d: %v", host, files, len(parts), parts)
			continue
		}

		for _, part := range parts {
			if !slices.ContainsFunc(files, func(f string) bool { return strings.Contains(f, part) }) {
				t.Errorf("%s holds the images %v, none of them %s", host, files, part)
			}
		}
	}
}

// wantNodeTaints waits (Talos applies a configuration's taints to the Node shortly after the
// configuration) until every named Node has exactly the taints given ("key=value:Effect"), and
// fails with what they have after 30 s.
func wantNodeTaints(t *testing.T, kc kubernetes.Interface, want map[string][]string) {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var got map[string][]string

	for {
		got = map[string][]string{}

		for name := range want {
			got[name] = nil

			n, err := kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				got[name] = []string{"error: " + err.Error()}
				continue
			}

			for _, tn := range n.Spec.Taints {
				s := tn.Key
				if tn.Value != "" {
					s += "=" + tn.Value
				}

				got[name] = append(got[name], s+":"+string(tn.Effect))
			}

			slices.Sort(got[name])
		}

		if maps.EqualFunc(got, want, func(a, b []string) bool { return slices.Equal(a, b) }) {
			return
		}

		select {
		case <-ctx.Done():
			t.Fatalf("Node taints %v, want %v", got, want)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// wantGPUNode checks the NVIDIA preset of the node at addr running schematic: the schematic the
// stack registered for it has the NVIDIA extensions, the node runs a configuration loading the
// NVIDIA kernel modules with the toolkit's sysctl, and the nvidia RuntimeClass exists.
func wantGPUNode(t *testing.T, p *lab.Pulumi, kc kubernetes.Interface, addr, schematic string) {
	t.Helper()

	registered := ""

	for _, r := range exportState(t, p).Deployment.Resources {
		if r.Type == "talos:imageFactory/schematic:Schematic" && r.ID == schematic {
			registered, _ = r.Outputs["schematic"].(string)
		}
	}

	for _, ext := range []string{"siderolabs/nonfree-kmod-nvidia-production", "siderolabs/nvidia-container-toolkit-production", "siderolabs/iscsi-tools"} {
		if !strings.Contains(registered, ext) {
			t.Errorf("the schematic %s the GPU node runs (%q) lacks %s", schematic, registered, ext)
		}
	}

	c := stackTalosClient(t, p, addr)
	defer c.Close() //nolint:errcheck

	// The node reports the extensions of the image it runs (`talosctl get extensions`).
	exts, err := safe.StateListAll[*runtime.ExtensionStatus](client.WithNode(t.Context(), addr), c.COSI)
	if err != nil {
		t.Fatal(err)
	}

	var reported []string
	for e := range exts.All() {
		reported = append(reported, e.TypedSpec().Metadata.Name)
	}

	for _, want := range []string{"schematic", "nonfree-kmod-nvidia-production", "nvidia-container-toolkit-production", "iscsi-tools"} {
		if !slices.Contains(reported, want) {
			t.Errorf("the GPU node reports the extensions %v, not %s", reported, want)
		}
	}

	running := runningConfig(t, c, addr)
	for _, want := range []string{"- name: nvidia\n", "- name: nvidia_uvm\n", "- name: nvidia_drm\n", "- name: nvidia_modeset\n", `net.core.bpf_jit_harden: "1"`} {
		if !strings.Contains(running, want) {
			t.Errorf("the GPU node's configuration lacks %q:\n%s", want, running)
		}
	}

	rc, err := kc.NodeV1().RuntimeClasses().Get(t.Context(), "nvidia", metav1.GetOptions{})
	if err != nil || rc.Handler != "nvidia" {
		t.Errorf("the nvidia RuntimeClass: %v, %v", rc, err)
	}

	wantDevicePlugin(t, kc, "worker-2")
}

// wantDevicePlugin waits until NVIDIA's device plugin DaemonSet (the chart's, through the
// manifests) runs exactly one pod, on node, with the nvidia RuntimeClass: the chart's affinity
// selects the GPU nodes by the label the component gives them.
func wantDevicePlugin(t *testing.T, kc kubernetes.Interface, node string) {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	var last string

	for {
		pods, err := kc.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nvidia-device-plugin"})
		if err == nil {
			var on []string
			for _, p := range pods.Items {
				if p.Spec.RuntimeClassName != nil && *p.Spec.RuntimeClassName == "nvidia" {
					on = append(on, p.Spec.NodeName)
				}
			}

			if slices.Equal(on, []string{node}) && len(pods.Items) == 1 {
				return
			}

			last = fmt.Sprintf("%d pods, with the nvidia RuntimeClass on %v", len(pods.Items), on)
		} else {
			last = err.Error()
		}

		select {
		case <-ctx.Done():
			t.Fatalf("NVIDIA's device plugin: %s, want one pod on %s", last, node)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
