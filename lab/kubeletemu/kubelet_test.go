package kubeletemu_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
)

// Registration as a kubelet does it (checked against client-go's fake; the lab's tests against a
// real API server are in lab/talosemu): labels, the control-plane taint, the kubelet version, and
// NotReady with the kubelet's own message until a CNI pod runs, then Ready.
func TestRegistersNotReadyUntilTheCNIRuns(t *testing.T) {
	t.Parallel()

	client := fake.NewClientset()

	k, err := kubeletemu.Start(t.Context(), kubeletemu.Options{
		Client: client, NodeName: "cp-1", InternalIP: "127.0.9.2", KubeletVersion: "v1.34.1", ControlPlane: true,
		HeartbeatInterval: 50 * time.Millisecond,
		StaticPods:        []kubeletemu.StaticPod{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.34.1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()

	node, err := client.CoreV1().Nodes().Get(t.Context(), "cp-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if _, ok := node.Labels["node-role.kubernetes.io/control-plane"]; !ok || len(node.Spec.Taints) != 1 {
		t.Fatalf("labels %v, taints %v", node.Labels, node.Spec.Taints)
	}

	if node.Status.NodeInfo.KubeletVersion != "v1.34.1" || readyStatus(node) != corev1.ConditionFalse {
		t.Fatalf("nodeInfo %v, ready %v", node.Status.NodeInfo, readyStatus(node))
	}

	mirror, err := client.CoreV1().Pods("kube-system").Get(t.Context(), "kube-apiserver-cp-1", metav1.GetOptions{})
	if err != nil || mirror.Annotations["kubernetes.io/config.mirror"] == "" || mirror.Status.Phase != corev1.PodRunning {
		t.Fatalf("mirror pod %v, %v", mirror, err)
	}

	// A Flannel-like pod: host network, /etc/cni/net.d mounted.
	_, err = client.CoreV1().Pods("kube-system").Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "flannel"},
		Spec: corev1.PodSpec{
			NodeName: "cp-1", HostNetwork: true, Containers: []corev1.Container{{Name: "f", Image: "flannel"}},
			Volumes: []corev1.Volume{{Name: "cni", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/cni/net.d"}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(10 * time.Second)
	for !k.NetworkReady() {
		if time.Now().After(deadline) {
			t.Fatal("the network never became ready")
		}

		time.Sleep(20 * time.Millisecond)
	}

	time.Sleep(200 * time.Millisecond) // a heartbeat

	node, _ = client.CoreV1().Nodes().Get(t.Context(), "cp-1", metav1.GetOptions{})
	if readyStatus(node) != corev1.ConditionTrue {
		t.Fatalf("node not Ready after the CNI ran: %v", node.Status.Conditions)
	}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}

	return ""
}
