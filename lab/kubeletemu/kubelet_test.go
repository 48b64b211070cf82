package kubeletemu_test

import (
	"slices"
	"strings"
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

// A dual-stack node: one InternalIP per family in the order given, host-network pods with both as
// host IPs, other pods with one IP from each of the Node's pod CIDRs (checked against client-go's
// fake; lab/talosemu checks it against a real API server).
func TestDualStackAddresses(t *testing.T) {
	t.Parallel()

	client := fake.NewClientset()

	k, err := kubeletemu.Start(t.Context(), kubeletemu.Options{
		Client: client, NodeName: "w-1", InternalIPs: []string{"fd1a:b:0:67::21", "127.0.67.21"}, KubeletVersion: "v1.34.1",
		HeartbeatInterval: 50 * time.Millisecond, CNIConfigured: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()

	node, err := client.CoreV1().Nodes().Get(t.Context(), "w-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	want := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "fd1a:b:0:67::21"}, {Type: corev1.NodeInternalIP, Address: "127.0.67.21"},
		{Type: corev1.NodeHostName, Address: "w-1"},
	}
	if !slices.Equal(node.Status.Addresses, want) {
		t.Fatalf("addresses %v, want %v", node.Status.Addresses, want)
	}

	// What the controller-manager's node IPAM would allocate.
	node.Spec.PodCIDRs = []string{"fd00:10:244:1::/64", "10.244.1.0/24"}
	if _, err := client.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	time.Sleep(200 * time.Millisecond) // a heartbeat reads them

	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "host"}, Spec: corev1.PodSpec{NodeName: "w-1", HostNetwork: true, Containers: []corev1.Container{{Name: "c"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pod"}, Spec: corev1.PodSpec{NodeName: "w-1", Containers: []corev1.Container{{Name: "c"}}}},
	} {
		if _, err := client.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	deadline := time.Now().Add(10 * time.Second)

	for {
		host, _ := client.CoreV1().Pods("default").Get(t.Context(), "host", metav1.GetOptions{})
		pod, _ := client.CoreV1().Pods("default").Get(t.Context(), "pod", metav1.GetOptions{})

		hostOK := host.Status.HostIP == "fd1a:b:0:67::21" && len(host.Status.PodIPs) == 2 && host.Status.PodIPs[1].IP == "127.0.67.21"
		podOK := len(pod.Status.PodIPs) == 2 && strings.HasPrefix(pod.Status.PodIP, "fd00:10:244:1::") &&
			strings.HasPrefix(pod.Status.PodIPs[1].IP, "10.244.1.") && len(pod.Status.HostIPs) == 2

		if hostOK && podOK {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("host-network pod %+v, pod %+v", host.Status, pod.Status)
		}

		time.Sleep(20 * time.Millisecond)
	}
}
