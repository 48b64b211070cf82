//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// TestReplaceNodes moves a control plane and a worker (with a pod) to another Proxmox host in one
// up: each keeps its name on a new VM, and its previous instance leaves the cluster first (the
// control plane leaves etcd, so etcd never lists a dead member; the worker is drained, its pod
// evicted). Then `pulumi destroy` tears the cluster down without retiring anything.
func TestReplaceNodes(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 37}, func(l *lab.Lab) string { return haCluster(l, "replace", "v1.11.5") })

	mustRun(t, p, "up", "--yes", "--skip-preview")

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	if _, err := kc.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{NodeName: "worker-1", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	editProgram(t, e, "cp-2: {hostNode: pve2", "cp-2: {hostNode: pve3")
	editProgram(t, e, "worker-1: {hostNode: pve1", "worker-1: {hostNode: pve3")

	preview := mustRun(t, p, "preview", "--diff")
	for _, want := range []string{"replace-cp-2-retire", "replace-worker-1-retire"} {
		if !strings.Contains(preview, want) {
			t.Errorf("the preview does not show %s replaced:\n%s", want, preview)
		}
	}

	start := time.Now()

	upCtx, upCancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer upCancel()

	out, err := p.Run(upCtx, "up", "--yes", "--skip-preview")
	if err != nil {
		t.Fatalf("the up that replaces cp-2 and worker-1: %v\n%s", err, out)
	}

	for _, want := range []string{
		"cp-2: the previous instance left the cluster", "worker-1: the previous instance left the cluster",
		"the cluster is healthy (5 nodes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the up does not say %q:\n%s", want, out)
		}
	}

	// etcd never listed a member that did not run: the old cp-2 left before its VM went.
	for _, ev := range eventsSince(l, t, start).events {
		if ev.Kind == "etcd" && ev.Running < ev.Members {
			t.Errorf("etcd listed a dead member during the replacement: %v", ev)
		}
	}

	if got := etcdMemberNames(t, p, l.Address(11)); !slices.Equal(got, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Errorf("etcd members after the replacement: %v", got)
	}

	if _, err := kc.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod on the old worker-1 was not evicted before its VM was replaced (%v)", err)
	}

	if vms := l.PVE.VMs(); len(vms) != 5 {
		t.Errorf("%d VMs after the replacement, want 5", len(vms))
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	out = mustRun(t, p, "destroy", "--yes", "--skip-preview")
	if strings.Contains(out, "left the cluster") || !strings.Contains(out, "the cluster is being torn down: nothing to do") {
		t.Errorf("the destroy retired nodes one by one:\n%s", out)
	}

	if vms := l.PVE.VMs(); len(vms) != 0 {
		t.Errorf("%d VMs after the destroy", len(vms))
	}
}
