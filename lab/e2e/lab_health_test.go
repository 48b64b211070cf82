//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// editProgram replaces from with to in the project's Pulumi.yaml; from must be there.
func editProgram(t testing.TB, e *env, from, to string) {
	t.Helper()

	program := filepath.Join(e.dir, "Pulumi.yaml")

	text, err := os.ReadFile(program)
	if err != nil {
		t.Fatal(err)
	}

	if !strings.Contains(string(text), from) {
		t.Fatalf("the program has no %q:\n%s", from, text)
	}

	if err := os.WriteFile(program, []byte(strings.Replace(string(text), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readProgram(t *testing.T, e *env) string {
	t.Helper()

	text, err := os.ReadFile(filepath.Join(e.dir, "Pulumi.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	return string(text)
}

func writeProgram(t *testing.T, e *env, text string) {
	t.Helper()

	if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHealthGateFailsAndRunsAgain runs the health gate of a cluster whose configuration sets the
// CNI to none (a config patch; no cilium, no CNI manifest). Talos deploys no Flannel, so every
// Node stays NotReady with the kubelet's "cni plugin not initialized" (the lab's kubelets say so
// until a CNI's pod runs on their node) and CoreDNS cannot start: the gate passes without waiting
// for Ready Nodes and says so. Then cp-3's etcd stops; the next change's health gate times out
// naming the check and cp-3's address, nothing is deleted; once etcd runs again, the next up runs
// the gate again and passes. With health.requireNodesReady the gate waits for every Node to be
// Ready and fails naming that check; once a CNI runs (a DaemonSet that installs its configuration
// in /etc/cni/net.d, deployed by hand), it passes.
func TestHealthGateFailsAndRunsAgain(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 19}, func(l *lab.Lab) string {
		return strings.Replace(haCluster(l, "gate", "v1.11.5"), "      kubernetesVersion: v1.33.5\n",
			"      kubernetesVersion: v1.33.5\n      health: {timeout: 2m}\n      configPatches:\n"+
				"        - |\n          cluster:\n            network:\n              cni:\n                name: none\n", 1)
	})

	out := mustRun(t, p, "up", "--yes", "--skip-preview")
	if !strings.Contains(out, "the gate does not wait for Nodes to be Ready") || !strings.Contains(out, "the cluster is healthy (5 nodes") {
		t.Errorf("the up does not say that its gate skipped the Nodes' readiness:\n%s", out)
	}

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	withoutCNI(t, kc)

	cp3 := labNodes(t, l)["cp-3"]
	cp3.StopEtcd()

	editProgram(t, e, "health: {timeout: 2m}", "health: {timeout: 15s}")

	worker := "role: worker, ip: " + l.Address(21) + "}"
	editProgram(t, e, worker, "role: worker, ip: "+l.Address(21)+", labels: {tier: gold}}")

	out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err == nil {
		t.Fatalf("the up passed the health gate with cp-3's etcd stopped:\n%s", out)
	}

	for _, want := range []string{"the cluster is not healthy after 15s", "etcd", cp3.IP()} {
		if !strings.Contains(out, want) {
			t.Errorf("the gate's error does not name %q:\n%s", want, out)
		}
	}

	if n := len(l.PVE.VMs()); n != 5 {
		t.Errorf("%d VMs after the failed gate, want all 5", n)
	}

	cp3.StartEtcd()

	out = mustRun(t, p, "up", "--yes", "--skip-preview")
	if !strings.Contains(out, "gate-health updated") || !strings.Contains(out, "the cluster is healthy (5 nodes") {
		t.Errorf("the next up did not run the gate again:\n%s", out)
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	// health.requireNodesReady overrides the skip: without a CNI the gate cannot pass.
	editProgram(t, e, "health: {timeout: 15s}", "health: {timeout: 15s, requireNodesReady: true}")

	out, err = p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err == nil || !strings.Contains(out, "the cluster is not healthy after 15s: all nodes of the cluster to be Ready") {
		t.Fatalf("with health.requireNodesReady and no CNI the gate did not fail on the Nodes' readiness: %v\n%s", err, out)
	}

	if strings.Contains(out, "the gate does not wait for Nodes to be Ready") {
		t.Errorf("the up says the gate skips the Nodes' readiness although health.requireNodesReady is set:\n%s", out)
	}

	// The user deploys a CNI; the Nodes turn Ready and the gate passes with the check.
	deployCNI(t, kc)

	editProgram(t, e, "health: {timeout: 15s,", "health: {timeout: 2m,")

	out = mustRun(t, p, "up", "--yes", "--skip-preview")
	if !strings.Contains(out, "the cluster is healthy (5 nodes") {
		t.Errorf("the gate did not pass once a CNI runs:\n%s", out)
	}

	if err := readyNodes(t.Context(), kc, 5); err != nil {
		t.Errorf("after the gate with health.requireNodesReady: %v", err)
	}

	mustRun(t, p, "preview", "--expect-no-changes")
}

// withoutCNI checks what a cluster without a CNI looks like: no Flannel, every Node NotReady
// with the kubelet's own reason, no CoreDNS pod ready.
func withoutCNI(t *testing.T, kc kubernetes.Interface) {
	t.Helper()

	ctx := t.Context()

	if _, err := kc.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-flannel", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kube-system/kube-flannel: %v; with the CNI none Talos deploys no Flannel", err)
	}

	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if len(nodes.Items) != 5 {
		t.Errorf("%d Nodes registered, want 5", len(nodes.Items))
	}

	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && (c.Status == corev1.ConditionTrue || !strings.Contains(c.Message, "cni plugin not initialized")) {
				t.Errorf("Node %s is %s (%s) without a CNI; want NotReady with the kubelet's network message", n.Name, c.Status, c.Message)
			}
		}
	}

	coredns, err := kc.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CoreDNS: %v", err)
	}

	if coredns.Status.ReadyReplicas != 0 {
		t.Errorf("%d CoreDNS pods are ready without a CNI", coredns.Status.ReadyReplicas)
	}
}

// deployCNI deploys a CNI the way one is deployed (a host-network DaemonSet that tolerates
// every taint and installs the node's CNI configuration in /etc/cni/net.d) and waits until every
// Node is Ready.
func deployCNI(t *testing.T, kc kubernetes.Interface) {
	t.Helper()

	labels := map[string]string{"app": "lab-cni"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "lab-cni", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "install-cni", Image: "registry.k8s.io/pause:3.10",
						VolumeMounts: []corev1.VolumeMount{{Name: "cni", MountPath: "/host/etc/cni/net.d"}},
					}},
					Volumes: []corev1.Volume{{Name: "cni", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/etc/cni/net.d"},
					}}},
				},
			},
		},
	}

	if _, err := kc.AppsV1().DaemonSets("kube-system").Create(t.Context(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var last error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if last = readyNodes(t.Context(), kc, 5); last == nil {
			return
		}
	}

	t.Fatalf("the Nodes did not turn Ready once a CNI ran: %v", last)
}

// TestUpgradeDrainTimesOut: a pod on worker-1 never finishes terminating; worker-1's upgrade
// stops after upgrade.drainTimeout with an error naming the pod, worker-1 is not rebooted and
// is schedulable again, and worker-2 is not touched.
func TestUpgradeDrainTimesOut(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	opts := lab.Options{Subnet: 20, Kube: func(k *talosemu.KubeOptions) {
		k.HungPod = func(p *corev1.Pod) bool { return p.Name == "stuck" }
	}}
	l, p := onLab(t, e, opts, func(l *lab.Lab) string { return haCluster(l, "drain", "v1.11.5") })

	editProgram(t, e, "kubernetesVersion: v1.33.5", "kubernetesVersion: v1.33.5\n      upgrade: {drainTimeout: 5s}")
	mustRun(t, p, "up", "--yes", "--skip-preview")

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	if _, err := kc.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck"},
		Spec:       corev1.PodSpec{NodeName: "worker-1", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	setTalosVersion(t, e, "v1.11.5", "v1.11.6")
	start := time.Now()

	out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err == nil {
		t.Fatalf("the up passed although a pod on worker-1 never terminates:\n%s", out)
	}

	if !strings.Contains(out, "draining node worker-1") || !strings.Contains(out, "default/stuck") {
		t.Errorf("the error does not name the node and the pod:\n%s", out)
	}

	downs := eventsSince(l, t, start).downs()
	if strings.Join(slices.Sorted(slices.Values(downs)), ",") != "cp-1,cp-2,cp-3" {
		t.Errorf("nodes that went down: %v, want the control planes only", downs)
	}

	node, err := kc.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if node.Spec.Unschedulable {
		t.Error("worker-1 stays cordoned after its drain failed; it was not rebooted and should take pods again")
	}
}

func kubeClient(t testing.TB, kubeconfig string) kubernetes.Interface {
	t.Helper()

	rc, err := clientcmd.RESTConfigFromKubeConfig([]byte(strings.TrimSpace(kubeconfig)))
	if err != nil {
		t.Fatalf("the kubeconfig output does not load: %v", err)
	}

	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}

	return kc
}

// TestKubernetesSkipRefusedAtPreview: Kubernetes moves one minor at a time; a change that skips
// one is refused at preview, naming the step to take.
func TestKubernetesSkipRefusedAtPreview(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	_, p := onSmallCluster(t, e, "kskip", lab.Options{Subnet: 33})

	editProgram(t, e, "talosVersion: v1.11.5", "talosVersion: v1.11.5\n      kubernetesVersion: v1.32.3")
	mustRun(t, p, "up", "--yes", "--skip-preview")

	editProgram(t, e, "kubernetesVersion: v1.32.3", "kubernetesVersion: v1.34.1")

	out, err := p.Run(t.Context(), "preview")
	if err == nil || !strings.Contains(out, "kubernetesVersion: v1.32.3 → v1.34.1 skips v1.33") {
		t.Fatalf("a two-minor Kubernetes jump previews without the error: %v\n%s", err, out)
	}
}
