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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// taintsProgram is a cluster of one control plane and one worker with taints: one for every node
// (nodeDefaults) and the worker's own, control planes not schedulable.
func taintsProgram(l *lab.Lab) string {
	return fmt.Sprintf(`name: taints
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  taints:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: taints
      talosVersion: v1.11.5
      allowSchedulingOnControlPlanes: false
      network:
        gateway: %[1]s
      image:
        factoryUrl: ${factoryUrl}
      nodeDefaults:
        taints: ["example.com/pool=home:PreferNoSchedule"]
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[2]s}
        worker-1: {hostNode: pve2, role: worker, ip: %[3]s, taints: ["dedicated=storage:NoSchedule"]}
outputs:
  kubeconfig: ${taints.kubeconfig}
`, l.Address(1), l.Address(11), l.Address(21))
}

// TestTaintsAndControlPlaneScheduling: declared taints (nodeDefaults' and a node's own) and the
// control-plane taint of allowSchedulingOnControlPlanes: false reach the Nodes as Talos sets them.
// Allowing scheduling on control planes and changing the taints is previewed as configuration
// changes that apply live: after the `up` the control plane's Node has lost its NoSchedule taint,
// the worker's has its new taint and not the removed ones, and no node rebooted. Disallowing it
// again taints the control plane again, live; the preview after is clean.
func TestTaintsAndControlPlaneScheduling(t *testing.T) {
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
