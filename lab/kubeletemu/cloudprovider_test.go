package kubeletemu_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
)

// startCounting starts a kubelet whose accepted statuses are sent on the returned channel.
func startCounting(t *testing.T, opts kubeletemu.Options) (*kubeletemu.Kubelet, <-chan struct{}) {
	t.Helper()

	beats := make(chan struct{}, 64)
	opts.HeartbeatInterval = 20 * time.Millisecond
	opts.OnStatus = func(bool) {
		select {
		case beats <- struct{}{}:
		default:
		}
	}

	k, err := kubeletemu.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(k.Stop)

	return k, beats
}

// nextStatus waits for a status the kubelet posts after the call.
func nextStatus(t *testing.T, beats <-chan struct{}) {
	t.Helper()

	for len(beats) > 0 {
		<-beats
	}

	select {
	case <-beats:
	case <-time.After(10 * time.Second):
		t.Fatal("no status posted")
	}
}

func getNode(t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()

	node, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	return node
}

// A kubelet with --cloud-provider=external and --provider-id registers its Node with the
// providerID, the uninitialized taint after its registerWithTaints and its node IPs announced in
// alpha.kubernetes.io/provided-node-ip; once the Node has addresses they are the cloud controller
// manager's to change.
func TestExternalCloudProviderRegistration(t *testing.T) {
	t.Parallel()

	client := fake.NewClientset()
	k, beats := startCounting(t, kubeletemu.Options{
		Client: client, NodeName: "cp-1", InternalIPs: []string{"127.0.9.2", "fd1a::2"}, KubeletVersion: "v1.34.1",
		ControlPlane: true, ProviderID: "proxmox://lab/104", ExternalCloudProvider: true,
	})

	node := getNode(t, client, "cp-1")
	wantTaints := []corev1.Taint{
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: kubeletemu.UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule},
	}

	if node.Spec.ProviderID != "proxmox://lab/104" || !slices.Equal(node.Spec.Taints, wantTaints) {
		t.Fatalf("providerID %q, taints %v", node.Spec.ProviderID, node.Spec.Taints)
	}

	if got := node.Annotations["alpha.kubernetes.io/provided-node-ip"]; got != "127.0.9.2,fd1a::2" {
		t.Fatalf("provided-node-ip = %q", got)
	}

	if len(node.Status.Addresses) != 3 || node.Status.Addresses[0].Address != "127.0.9.2" {
		t.Fatalf("addresses %v", node.Status.Addresses)
	}

	// What a cloud controller manager would write: the kubelet keeps it.
	ccm := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.4"}, {Type: corev1.NodeHostName, Address: "cp-1"}}
	node.Status.Addresses = ccm

	if _, err := client.CoreV1().Nodes().UpdateStatus(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	nextStatus(t, beats)

	node = getNode(t, client, "cp-1")
	if !slices.Equal(node.Status.Addresses, ccm) {
		t.Fatalf("addresses after a heartbeat: %v, want the CCM's %v", node.Status.Addresses, ccm)
	}

	if !slices.Equal(node.Spec.Taints, wantTaints) {
		t.Fatalf("taints after a heartbeat: %v", node.Spec.Taints)
	}

	// A restarted kubelet without the flags takes over the existing Node (the API server set its
	// creation time; client-go's fake does not): providerID and taints stay, the annotation goes,
	// the addresses are the kubelet's again.
	k.Stop()

	node.CreationTimestamp = metav1.Now()
	if _, err := client.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	_, beats = startCounting(t, kubeletemu.Options{
		Client: client, NodeName: "cp-1", InternalIPs: []string{"127.0.9.2"}, KubeletVersion: "v1.34.1",
		ControlPlane: true, ProviderID: "proxmox://lab/999",
	})
	nextStatus(t, beats)

	node = getNode(t, client, "cp-1")
	if node.Spec.ProviderID != "proxmox://lab/104" || !slices.Equal(node.Spec.Taints, wantTaints) {
		t.Fatalf("after a restart: providerID %q, taints %v", node.Spec.ProviderID, node.Spec.Taints)
	}

	if _, ok := node.Annotations["alpha.kubernetes.io/provided-node-ip"]; ok || node.Status.Addresses[0].Address != "127.0.9.2" {
		t.Fatalf("after a restart without an external cloud provider: annotations %v, addresses %v", node.Annotations, node.Status.Addresses)
	}
}

// Without the flags nothing of the above: no providerID, no uninitialized taint, no annotation.
func TestNoCloudProvider(t *testing.T) {
	t.Parallel()

	client := fake.NewClientset()
	startCounting(t, kubeletemu.Options{Client: client, NodeName: "w-1", InternalIP: "127.0.9.3", KubeletVersion: "v1.34.1"})

	node := getNode(t, client, "w-1")
	if node.Spec.ProviderID != "" || len(node.Spec.Taints) != 0 || node.Annotations["alpha.kubernetes.io/provided-node-ip"] != "" {
		t.Fatalf("providerID %q, taints %v, annotations %v", node.Spec.ProviderID, node.Spec.Taints, node.Annotations)
	}
}
