package talosemu_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubectl/pkg/drain"
	"k8s.io/utils/ptr"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubecp"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// kubeCluster is a registry that runs Kubernetes; hung pods are those labelled hang=true.
func kubeCluster(t *testing.T) *talosemu.Cluster {
	t.Helper()

	bin, err := kubecp.Binary()
	if err != nil {
		t.Fatal(err)
	}

	c := talosemu.NewClusterWith(talosemu.ClusterOptions{
		Dir: t.TempDir(), FastEtcd: true, Logf: t.Logf,
		Kube: &talosemu.KubeOptions{
			Bin: bin, Heartbeat: time.Second, NodeMonitorGracePeriod: 5 * time.Second,
			HungPod: func(p *corev1.Pod) bool { return p.Labels["hang"] == "true" },
		},
	})
	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	return c
}

// clientFromTalos gets the admin kubeconfig through the Talos Kubeconfig API and builds client-go
// from it, unchanged, as a user of the stack output would.
func clientFromTalos(t *testing.T, cp *talosemu.Node) kubernetes.Interface {
	t.Helper()

	raw, err := secureClient(t, cp).Kubeconfig(nodeCtx(t, cp))
	if err != nil {
		t.Fatal(err)
	}

	rc, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		t.Fatal(err)
	}

	return kubernetes.NewForConfigOrDie(rc)
}

func eventually(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()

	deadline := time.Now().Add(d)

	for {
		err := f()
		if err == nil {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}

		time.Sleep(200 * time.Millisecond)
	}
}

func nodeReady(kc kubernetes.Interface, name string) error {
	n, err := kc.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}

	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}

	return fmt.Errorf("node %s not Ready: %v", name, n.Status.Conditions)
}

const inlineV1 = `cluster:
  inlineManifests:
    - name: lab
      contents: |
        apiVersion: v1
        kind: Namespace
        metadata:
          name: lab
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: settings
          namespace: lab
        data:
          color: blue
`

// The whole Kubernetes side on a 1+1 cluster: a real API server reached through the Talos
// kubeconfig, kubelets registering Ready once Flannel's pods run, static pods, manifests created
// once, a real drain (evictions, a disruption budget, a pod that never terminates), and a powered-off
// node going NotReady by the node lifecycle controller.
func TestKubernetesOnTheLab(t *testing.T) {
	t.Parallel()

	cluster := kubeCluster(t)
	endpoint := nextHost()
	// Workloads may run on the control plane, so that drained pods have somewhere to go.
	patch := fmt.Sprintf("cluster:\n  allowSchedulingOnControlPlanes: true\n  controlPlane:\n    endpoint: https://%s:6443\n", endpoint)

	cp := startNode(t, talosemu.Options{Cluster: cluster, TalosVersion: "v1.13.9"})
	install(t, cp, machineConfig(t, machine.TypeControlPlane, "cp-1", patch, inlineV1))

	w := startNode(t, talosemu.Options{Cluster: cluster, TalosVersion: "v1.13.9"})
	install(t, w, machineConfig(t, machine.TypeWorker, "w-1", patch))

	if err := secureClient(t, cp).Bootstrap(nodeCtx(t, cp), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	waitStateFor(t, cp, 30*time.Second, talosemu.StateBootstrapped)

	kc := clientFromTalos(t, cp)
	ctx := t.Context()

	// The API server comes up a few seconds after etcd, as on a real control plane.
	eventually(t, 60*time.Second, "API server", func() error {
		v, err := kc.Discovery().ServerVersion()
		if err == nil && v.GitVersion != "v1.37.0" {
			err = fmt.Errorf("server version %s", v.GitVersion)
		}

		return err
	})

	for _, name := range []string{"cp-1", "w-1"} {
		eventually(t, 90*time.Second, "node Ready", func() error { return nodeReady(kc, name) })
	}

	// The event log has the bootstrap, then each node's first Ready (benchmarks time from them).
	var boot time.Time

	ready := map[string]time.Time{}

	for _, ev := range cluster.Events() {
		switch ev.Kind {
		case "bootstrap":
			boot = ev.Time
		case "ready":
			ready[ev.Node] = ev.Time
		}
	}

	if boot.IsZero() || len(ready) != 2 || !ready["cp-1"].After(boot) || !ready["w-1"].After(boot) {
		t.Errorf("events: bootstrap %v, ready %v; want the bootstrap, then cp-1 and w-1 Ready", boot, ready)
	}

	n, _ := kc.CoreV1().Nodes().Get(ctx, "w-1", metav1.GetOptions{})
	if got := n.Status.NodeInfo.KubeletVersion; got != "v"+talosemu.BundleKubernetesVersion {
		t.Errorf("kubelet version %q", got)
	}

	eventually(t, 30*time.Second, "static pods", func() error {
		p, err := kc.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-cp-1", metav1.GetOptions{})
		if err != nil {
			return err
		}

		if p.Status.Phase != corev1.PodRunning || !strings.Contains(p.Spec.Containers[0].Image, "kube-apiserver") {
			return fmt.Errorf("mirror pod %s %s", p.Status.Phase, p.Spec.Containers[0].Image)
		}

		return nil
	})

	eventually(t, 60*time.Second, "CoreDNS ready", func() error {
		d, err := kc.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return err
		}

		if d.Status.ReadyReplicas != 2 {
			return fmt.Errorf("coredns ready replicas %d", d.Status.ReadyReplicas)
		}

		return nil
	})

	// Inline manifests are created once; changing them later does not reach the cluster.
	eventually(t, 30*time.Second, "inline manifest", func() error {
		_, err := kc.CoreV1().ConfigMaps("lab").Get(ctx, "settings", metav1.GetOptions{})
		return err
	})

	changed := strings.ReplaceAll(inlineV1, "color: blue", "color: red") + `    - name: extra
      contents: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: added
          namespace: lab
`
	_, err := secureClient(t, cp).ApplyConfiguration(nodeCtx(t, cp), &machineapi.ApplyConfigurationRequest{
		Data: machineConfig(t, machine.TypeControlPlane, "cp-1", patch, changed), Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT,
	})
	if err != nil {
		t.Fatal(err)
	}

	eventually(t, 30*time.Second, "new inline manifest", func() error {
		_, err := kc.CoreV1().ConfigMaps("lab").Get(ctx, "added", metav1.GetOptions{})
		return err
	})

	if cm, _ := kc.CoreV1().ConfigMaps("lab").Get(ctx, "settings", metav1.GetOptions{}); cm.Data["color"] != "blue" {
		t.Fatalf("a changed inline manifest was re-applied: %v", cm.Data)
	}

	// Talos' own health checks pass on the healthy cluster…
	ci := healthInfo(t, []*talosemu.Node{cp}, []*talosemu.Node{w})
	if err := runHealth(t, ci, 2*time.Minute); err != nil {
		t.Fatalf("health checks on a healthy cluster: %v", err)
	}

	drainWorker(t, kc)

	// Powered off: the kubelet stops, and the node lifecycle controller marks the Node NotReady.
	w.Close() //nolint:errcheck
	eventually(t, 60*time.Second, "node NotReady", func() error {
		if nodeReady(kc, "w-1") == nil {
			return fmt.Errorf("w-1 still Ready")
		}

		return nil
	})

	// …and fail on the broken one.
	if err := runHealth(t, ci, 15*time.Second); err == nil {
		t.Fatal("health checks passed with a worker powered off")
	}
}

// drainWorker drains w-1 with kubectl's drain code: a pod kept by a budget blocks until the budget
// allows it, and a pod that never terminates makes the drain time out.
func drainWorker(t *testing.T, kc kubernetes.Interface) {
	t.Helper()

	ctx := t.Context()
	labels := map[string]string{"app": "web"}

	_, err := kc.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	_, err = kc.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	eventually(t, 60*time.Second, "web pods running", func() error {
		d, err := kc.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || d.Status.ReadyReplicas != 2 {
			return fmt.Errorf("ready %v %v", d, err)
		}

		return nil
	})

	helper := &drain.Helper{
		Ctx: ctx, Client: kc, Force: true, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		GracePeriodSeconds: -1, Timeout: 60 * time.Second, Out: &testWriter{t}, ErrOut: &testWriter{t},
	}

	node, err := kc.CoreV1().Nodes().Get(ctx, "w-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if err := drain.RunCordonOrUncordon(helper, node, true); err != nil {
		t.Fatal(err)
	}

	if err := drain.RunNodeDrain(helper, "w-1"); err != nil {
		t.Fatalf("drain: %v", err)
	}

	pods, _ := kc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=w-1"})
	if len(pods.Items) != 0 {
		t.Fatalf("pods left on w-1 after the drain: %d", len(pods.Items))
	}

	// A pod that never terminates: the drain times out.
	if err := drain.RunCordonOrUncordon(helper, node, false); err != nil {
		t.Fatal(err)
	}

	_, err = kc.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck", Labels: map[string]string{"hang": "true"}},
		Spec:       corev1.PodSpec{NodeName: "w-1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	helper.Timeout = 5 * time.Second
	if err := drain.RunNodeDrain(helper, "w-1"); err == nil {
		t.Fatal("a drain with a pod that never terminates succeeded")
	}
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))

	return len(p), nil
}

// When its only control plane machine is deleted, the cluster's API server is gone with it, as
// on Proxmox: the endpoint stops answering, and a cluster created next on the same addresses with
// new secrets (`pulumi destroy`, then `pulumi up`, on one lab) gets an API server of its own. A
// server left running would hold the endpoint and answer the new cluster with the old one's
// certificate, which its kubeconfig does not trust.
func TestAPIServerGoesWithTheLastControlPlane(t *testing.T) {
	t.Parallel()

	cluster := kubeCluster(t)
	addr, endpoint := nextHost(), nextHost()
	patch := fmt.Sprintf("cluster:\n  controlPlane:\n    endpoint: https://%s:6443\n", endpoint)
	apiAddr := net.JoinHostPort(endpoint, "6443")

	for round := range 2 {
		bundle, err := talosemu.NewBundle() // each round a new cluster: its own CAs
		if err != nil {
			t.Fatal(err)
		}

		cfg, err := bundle.MachineConfig(machine.TypeControlPlane, "machine:\n  network:\n    hostname: cp-1\n", patch)
		if err != nil {
			t.Fatal(err)
		}

		cp := startNode(t, talosemu.Options{Cluster: cluster, Address: addr, TalosVersion: "v1.13.9"})
		install(t, cp, cfg)

		tc, err := client.New(t.Context(), client.WithConfig(bundle.ClientConfig(cp.IP())), client.WithEndpoints(cp.IP()))
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { tc.Close() }) //nolint:errcheck

		if err := tc.Bootstrap(nodeCtx(t, cp), &machineapi.BootstrapRequest{}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}

		waitStateFor(t, cp, 30*time.Second, talosemu.StateBootstrapped)

		raw, err := tc.Kubeconfig(nodeCtx(t, cp))
		if err != nil {
			t.Fatal(err)
		}

		rc, err := clientcmd.RESTConfigFromKubeConfig(raw)
		if err != nil {
			t.Fatal(err)
		}

		kc := kubernetes.NewForConfigOrDie(rc)

		eventually(t, 60*time.Second, fmt.Sprintf("round %d: the API server ready, with this cluster's certificate", round), func() error {
			return kc.Discovery().RESTClient().Get().AbsPath("/readyz").Do(t.Context()).Error()
		})

		// The control plane is the lab's once cp-1's kubelet registers (it starts after).
		eventually(t, 60*time.Second, fmt.Sprintf("round %d: cp-1 registered", round), func() error {
			_, err := kc.CoreV1().Nodes().Get(t.Context(), "cp-1", metav1.GetOptions{})
			return err
		})

		if err := cp.Close(); err != nil {
			t.Fatal(err)
		}

		eventually(t, 20*time.Second, fmt.Sprintf("round %d: the API server gone with its machine", round), func() error {
			c, err := net.DialTimeout("tcp", apiAddr, time.Second)
			if err != nil {
				return nil //nolint:nilerr // refused: nothing listens, as wanted
			}

			_ = c.Close()

			return fmt.Errorf("%s still accepts connections", apiAddr)
		})
	}
}
