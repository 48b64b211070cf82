//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// etcdLeader names the member that leads etcd, read through a node's Talos API (EtcdStatus and
// the member list) with the stack's talosconfig output.
func etcdLeader(t *testing.T, p *lab.Pulumi, via string) string {
	t.Helper()

	c := stackTalosClient(t, p, via)
	defer c.Close() //nolint:errcheck

	st, err := c.EtcdStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	list, err := c.EtcdMemberList(t.Context(), &machineapi.EtcdMemberListRequest{})
	if err != nil {
		t.Fatal(err)
	}

	for _, s := range st.GetMessages() {
		for _, m := range list.GetMessages() {
			for _, mem := range m.GetMembers() {
				if mem.GetId() == s.GetMemberStatus().GetLeader() {
					return mem.GetHostname()
				}
			}
		}
	}

	t.Fatalf("no etcd leader through %s: %v", via, st)

	return ""
}

// stackTalosClient is a Talos API client of one node with the stack's talosconfig output.
func stackTalosClient(t *testing.T, p *lab.Pulumi, via string) *client.Client {
	t.Helper()

	cfg, err := clientconfig.FromString(mustRun(t, p, "stack", "output", "talosconfig", "--show-secrets"))
	if err != nil {
		t.Fatal(err)
	}

	c, err := client.New(t.Context(), client.WithConfig(cfg), client.WithEndpoints(via))
	if err != nil {
		t.Fatal(err)
	}

	return c
}

// etcdMemberNames reads the etcd member list (dead members included) through a node's Talos
// API, with the stack's talosconfig output.
func etcdMemberNames(t *testing.T, p *lab.Pulumi, via string) []string {
	t.Helper()

	c := stackTalosClient(t, p, via)
	defer c.Close() //nolint:errcheck

	resp, err := c.EtcdMemberList(t.Context(), &machineapi.EtcdMemberListRequest{})
	if err != nil {
		t.Fatal(err)
	}

	var names []string

	for _, m := range resp.GetMessages() {
		for _, mem := range m.GetMembers() {
			names = append(names, mem.GetHostname())
		}
	}

	slices.Sort(names)

	return names
}

// stopVM stops a VM through the Proxmox API, as a power failure of its host would look.
func stopVM(t *testing.T, l *lab.Lab, name string) {
	t.Helper()

	vm := vmOf(l, name)
	req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/api2/json/nodes/%s/qemu/%d/status/stop", vm.Node, vm.VMID), nil)
	req.Header.Set("Authorization", "PVEAPIToken="+l.APIToken())

	w := httptest.NewRecorder()
	l.PVE.ServeHTTP(w, req)

	if w.Code != http.StatusOK {
		t.Fatalf("stopping %s: %d %s", name, w.Code, w.Body)
	}

	deadline := time.Now().Add(30 * time.Second)
	for labNodes(t, l)[name] != nil {
		if time.Now().After(deadline) {
			t.Fatalf("%s's node still runs after its VM stopped", name)
		}

		time.Sleep(50 * time.Millisecond)
	}
}

func dropNode(t *testing.T, e *env, l *lab.Lab, name string, octet int) {
	t.Helper()

	host := map[string]string{"cp-1": "pve1", "cp-2": "pve2", "cp-3": "pve3", "worker-1": "pve1", "worker-2": "pve2"}[name]
	role := "worker"

	if strings.HasPrefix(name, "cp-") {
		role = "controlplane"
	}

	editProgram(t, e, fmt.Sprintf("        %s: {hostNode: %s, role: %s, ip: %s}\n", name, host, role, l.Address(octet)), "")
}

// TestRemoveNodesSafely removes a control plane and a worker with a pod in one up: the control
// plane leaves etcd (2 members left, a warning that the control plane is no longer fault
// tolerant), the worker is drained (its pod evicted), both Nodes are deleted, the VMs are
// deleted, and the health gate passes. Then the bootstrap node is removed the same way, and the
// cluster is not bootstrapped again.
func TestRemoveNodesSafely(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 34}, func(l *lab.Lab) string { return haCluster(l, "removal", "v1.11.5") })

	mustRun(t, p, "up", "--yes", "--skip-preview")

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	if _, err := kc.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{NodeName: "worker-2", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dropNode(t, e, l, "cp-3", 13)
	dropNode(t, e, l, "worker-2", 22)

	preview := mustRun(t, p, "preview", "--diff")
	if !strings.Contains(preview, "talos-proxmox:lifecycle:Membership: (update)") {
		t.Errorf("the preview does not show the membership update:\n%s", preview)
	}

	out := mustRun(t, p, "up", "--yes", "--skip-preview")

	for _, want := range []string{"removed from the cluster: [cp-3 worker-2]", "no longer survives the loss of a node", "the cluster is healthy (3 nodes"} {
		if !strings.Contains(out, want) {
			t.Errorf("the up does not say %q:\n%s", want, out)
		}
	}

	if got := etcdMemberNames(t, p, l.Address(11)); !slices.Equal(got, []string{"cp-1", "cp-2"}) {
		t.Errorf("etcd members after the removal: %v, want cp-1 and cp-2 (no dead member)", got)
	}

	for _, gone := range []string{"cp-3", "worker-2"} {
		if _, err := kc.CoreV1().Nodes().Get(ctx, gone, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Node %s still exists (%v)", gone, err)
		}
	}

	if _, err := kc.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod on worker-2 was not evicted (%v)", err)
	}

	if n := len(l.PVE.VMs()); n != 3 {
		t.Errorf("%d VMs after the removal, want 3", n)
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	// The bootstrap node goes too: cp-1 leaves etcd like any control plane, the cluster is never
	// bootstrapped again (its Bootstrap resource stays), and the kubeconfig now comes from cp-2.
	dropNode(t, e, l, "cp-1", 11)

	out = mustRun(t, p, "up", "--yes", "--skip-preview")
	if !strings.Contains(out, "removed from the cluster: [cp-1]") || !strings.Contains(out, "the cluster is healthy (2 nodes") {
		t.Errorf("the bootstrap node's removal:\n%s", out)
	}

	if strings.Contains(out, "removal-bootstrap") {
		t.Errorf("the up touched the Bootstrap resource (bootstrap must never run again):\n%s", out)
	}

	if got := etcdMemberNames(t, p, l.Address(12)); !slices.Equal(got, []string{"cp-2"}) {
		t.Errorf("etcd members after removing the bootstrap node: %v, want cp-2", got)
	}

	mustRun(t, p, "preview", "--expect-no-changes")
}

// TestRemovalKeepsQuorum: with cp-2's VM stopped, removing the healthy cp-3 is refused at preview
// (2 members, 1 healthy), naming cp-2; removing cp-2 instead works: its member is removed by id
// through the other control planes and its Node deleted.
func TestRemovalKeepsQuorum(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 35}, func(l *lab.Lab) string { return haCluster(l, "quorum", "v1.11.5") })

	mustRun(t, p, "up", "--yes", "--skip-preview")
	stopVM(t, l, "cp-2")

	base := readProgram(t, e)

	dropNode(t, e, l, "cp-3", 13)

	out, err := p.Run(t.Context(), "preview")
	if err == nil || !strings.Contains(out, "removing cp-3 would leave 1 healthy of 2 etcd members") || !strings.Contains(out, "bring cp-2 back") {
		t.Fatalf("removing a healthy control plane while cp-2 is down previews without the quorum error: %v\n%s", err, out)
	}

	// The refusal is the only error: the component's construct, cancelled while it waited for
	// the outputs that come through the refused Membership, adds none of its own.
	if strings.Contains(out, "awaiting input property") || strings.Contains(out, "context canceled") {
		t.Errorf("the refused preview prints a second, misleading error besides the refusal:\n%s", out)
	}

	writeProgram(t, e, base)
	dropNode(t, e, l, "cp-2", 12)

	mustRun(t, p, "up", "--yes", "--skip-preview")

	if got := etcdMemberNames(t, p, l.Address(11)); !slices.Equal(got, []string{"cp-1", "cp-3"}) {
		t.Errorf("etcd members after removing the stopped cp-2: %v, want cp-1 and cp-3", got)
	}

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	if _, err := kc.CoreV1().Nodes().Get(t.Context(), "cp-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Node cp-2 still exists (%v)", err)
	}
}
