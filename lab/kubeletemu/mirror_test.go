package kubeletemu_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
)

func staticPods(version string, names ...string) []kubeletemu.StaticPod {
	var out []kubeletemu.StaticPod
	for _, name := range names {
		out = append(out, kubeletemu.StaticPod{
			Name: name, Image: "registry.k8s.io/" + name + ":" + version,
			Labels:      map[string]string{"k8s-app": name, "tier": "control-plane"},
			Annotations: map[string]string{"talos.dev/config-version": "1"},
		})
	}

	return out
}

// Mirror pods of the static pods: named <name>-<node> in kube-system, annotated as the kubelet
// annotates them, owned by the Node, running with the static pods' images; a deleted one comes
// back; a restarted kubelet keeps the unchanged ones, replaces one whose image changed (an
// upgrade) and deletes the one it no longer runs.
func TestMirrorPods(t *testing.T) {
	t.Parallel()

	c := newClient()
	opts := kubeletemu.Options{
		Client: c, NodeName: "cp-1", InternalIP: "127.0.9.2", ControlPlane: true,
		StaticPods: staticPods("v1.34.1", "kube-apiserver", "kube-controller-manager", "kube-scheduler"),
	}
	k := start(t, opts)
	node := getNode(t, c, "cp-1")

	// Mirror pods run before the network is ready: they use the host's.
	uids := map[string]string{}

	for _, sp := range opts.StaticPods {
		p, err := getPod(t, c, "kube-system", sp.Name+"-cp-1")
		if err != nil {
			t.Fatal(err)
		}

		checkMirrorPod(t, p, sp, node)
		uids[p.Name] = string(p.UID)
	}

	// Deleted (gracefully, as kubectl does): deleted for good at once, then recreated.
	if err := c.CoreV1().Pods("kube-system").Delete(t.Context(), "kube-scheduler-cp-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, 5*time.Second, "mirror pod recreated", func() error {
		p, err := getPod(t, c, "kube-system", "kube-scheduler-cp-1")
		if err != nil {
			return err
		}

		if string(p.UID) == uids[p.Name] || p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("uid %s, phase %s", p.UID, p.Status.Phase)
		}

		return nil
	})

	// An upgraded API server, and no scheduler any more.
	k.Stop()

	opts.StaticPods = append(staticPods("v1.35.0", "kube-apiserver"), opts.StaticPods[1])
	start(t, opts)

	p, err := getPod(t, c, "kube-system", "kube-apiserver-cp-1")
	if err != nil {
		t.Fatal(err)
	}

	if string(p.UID) == uids[p.Name] {
		t.Error("the upgraded kube-apiserver's mirror pod was not replaced")
	}

	checkMirrorPod(t, p, opts.StaticPods[0], node)

	if p, err := getPod(t, c, "kube-system", "kube-controller-manager-cp-1"); err != nil || string(p.UID) != uids[p.Name] {
		t.Errorf("the unchanged mirror pod was replaced or lost: %v", err)
	}

	eventually(t, 5*time.Second, "orphaned mirror pod deleted", podGone(t, c, "kube-system", "kube-scheduler-cp-1"))
}

func checkMirrorPod(t *testing.T, p *corev1.Pod, sp kubeletemu.StaticPod, node *corev1.Node) {
	t.Helper()

	a := p.Annotations
	if a["kubernetes.io/config.mirror"] == "" || a["kubernetes.io/config.mirror"] != a["kubernetes.io/config.hash"] ||
		a["kubernetes.io/config.source"] != "file" || a["kubernetes.io/config.seen"] == "" || a["talos.dev/config-version"] != "1" {
		t.Errorf("%s: annotations %v", p.Name, a)
	}

	if p.Labels["k8s-app"] != sp.Name || p.Labels["tier"] != "control-plane" {
		t.Errorf("%s: labels %v", p.Name, p.Labels)
	}

	if refs := p.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].APIVersion != "v1" || refs[0].Name != node.Name ||
		refs[0].UID != node.UID || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("%s: owner references %+v", p.Name, refs)
	}

	if p.Spec.NodeName != node.Name || !p.Spec.HostNetwork || p.Spec.PriorityClassName != "system-node-critical" || p.Spec.Containers[0].Image != sp.Image {
		t.Errorf("%s: spec %+v", p.Name, p.Spec)
	}

	s := p.Status
	if s.Phase != corev1.PodRunning || podCondition(p, corev1.PodReady) != corev1.ConditionTrue || s.HostIP != "127.0.9.2" || s.PodIP != "127.0.9.2" ||
		len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].Image != sp.Image || s.ContainerStatuses[0].State.Running == nil {
		t.Errorf("%s: status %+v", p.Name, s)
	}
}

// A node without static pods has no mirror pods, and leaves other nodes' alone.
func TestNoMirrorPodsOnWorkers(t *testing.T) {
	t.Parallel()

	c := newClient()
	start(t, kubeletemu.Options{Client: c, NodeName: "cp-1", ControlPlane: true, StaticPods: staticPods("v1.34.1", "kube-apiserver")})
	start(t, kubeletemu.Options{Client: c, NodeName: "w-1", InternalIP: "127.0.9.3"})

	time.Sleep(10 * heartbeat)

	pods, err := c.CoreV1().Pods("kube-system").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "kube-apiserver-cp-1" {
		t.Fatalf("pods %v, %v", podNames(pods), err)
	}
}

func podNames(pods *corev1.PodList) []string {
	if pods == nil {
		return nil
	}

	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}

	return names
}
