package ccmemu_test

import (
	"context"
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/ccmemu"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
)

// A token with VM.Audit on the Nodes' VMs initializes them as the CCM's cloud-node controller
// does: a Node by its providerID, one without by its name, each checked against the VM's SMBIOS
// uuid; a Node whose providerID names no configured region, or whose systemUUID is another VM's,
// stays uninitialized.
func TestInitializesNodes(t *testing.T) {
	t.Parallel()

	pve := startProxmox(t, 104, 105, 106, 107)
	cp1 := pve.createVM("pve1", 104, "cp-1")
	// c1.medium: base64 without padding, which go-proxmox's smbios1 parser keeps
	w1 := pve.createVM("pve2", 105, "w-1", "smbios1", "uuid=9a6c1f3e-2b4d-4e6f-8a1b-3c5d7e9f0a2b,base64=1,sku="+
		base64.StdEncoding.EncodeToString([]byte("c1.medium")))
	other := pve.createVM("pve1", 106, "other-1")
	pve.createVM("pve1", 107, "w-2")

	client := fake.NewClientset(
		configSecret(pve.cloudConfig(ccmSecret)),
		kubeletNode("cp-1", "proxmox://cloud/104", cp1, "127.0.9.2"),
		kubeletNode("w-1", "", w1, "127.0.9.3"),
		kubeletNode("elsewhere", "proxmox://lab/106", other, "127.0.9.4"),
		kubeletNode("w-2", "proxmox://cloud/107", cp1, "127.0.9.5"),
	)
	l := newLogs(t)
	run(t, client, ccmPod("cp-1"), l)

	n := waitNode(t, client, "cp-1", func(n *corev1.Node) bool { return n != nil && initialized(n) })

	want := map[string]string{
		corev1.LabelTopologyRegion: region, corev1.LabelTopologyZone: "pve1", corev1.LabelInstanceTypeStable: "2VCPU-4GB",
		corev1.LabelFailureDomainBetaRegion: region, corev1.LabelFailureDomainBetaZone: "pve1", corev1.LabelInstanceType: "2VCPU-4GB",
		"topology.proxmox.sinextra.dev/region": region, "topology.proxmox.sinextra.dev/zone": "pve1",
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("cp-1: label %s = %q, want %q (labels %v)", k, n.Labels[k], v, n.Labels)
		}
	}

	if n.Spec.ProviderID != "proxmox://cloud/104" || len(n.Spec.Taints) != 0 {
		t.Errorf("cp-1: providerID %q, taints %v", n.Spec.ProviderID, n.Spec.Taints)
	}

	// the provided node IP first, then the hostname
	waitNode(t, client, "cp-1", func(n *corev1.Node) bool {
		return n != nil && slices.Equal(n.Status.Addresses, []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "127.0.9.2"}, {Type: corev1.NodeHostName, Address: "cp-1"},
		})
	})

	n = waitNode(t, client, "w-1", func(n *corev1.Node) bool { return n != nil && initialized(n) })
	if n.Spec.ProviderID != "proxmox://cloud/105" || n.Labels[corev1.LabelTopologyZone] != "pve2" ||
		n.Labels[corev1.LabelInstanceTypeStable] != "c1.medium" {
		t.Errorf("w-1 (found by name): providerID %q, labels %v", n.Spec.ProviderID, n.Labels)
	}

	l.wait("error syncing 'elsewhere'", "region not found")
	l.wait("w-2", "does not match SystemUUID")

	for _, name := range []string{"elsewhere", "w-2"} {
		if n := getNode(t, client, name); initialized(n) || len(n.Labels) != 0 {
			t.Errorf("%s was initialized: %+v", name, n)
		}
	}
}

// Without VM.Audit on its VM the token does not see it: the instance is "not found", the Node
// keeps its taint and the reason is logged. Once the ACL grants it, the next update of the Node
// initializes it.
func TestWithoutACLNodeStaysUninitialized(t *testing.T) {
	t.Parallel()

	pve := startProxmox(t)
	uuid := pve.createVM("pve1", 104, "cp-1")

	client := fake.NewClientset(configSecret(pve.cloudConfig(ccmSecret)), kubeletNode("cp-1", "proxmox://cloud/104", uuid, "127.0.9.2"))
	l := newLogs(t)
	run(t, client, ccmPod("cp-1"), l)

	l.wait("cp-1", "instance not found", "VM machine not found")
	l.wait("error syncing 'cp-1'", "failed to get node address from cloud provider that matches ip: 127.0.9.2")

	if n := getNode(t, client, "cp-1"); initialized(n) || n.Labels[corev1.LabelTopologyZone] != "" {
		t.Fatalf("cp-1 initialized without an ACL: %+v", n)
	}

	for _, ugid := range []string{"tokens", "users"} {
		id := ccmToken
		if ugid == "users" {
			id = "talos-cloud-ccm@pve"
		}

		pve.root(http.MethodPut, "access/acl", url.Values{"path": {"/vms/104"}, "roles": {"TalosCCM"}, ugid: {id}})
	}

	touchNode(t, client, "cp-1")
	waitNode(t, client, "cp-1", func(n *corev1.Node) bool {
		return n != nil && initialized(n) && n.Labels[corev1.LabelTopologyZone] == "pve1"
	})
}

// Without its Secret the container does not start: nothing is initialized, the reason is
// logged; once the Secret exists it starts. A token Proxmox refuses leaves the Node as it is.
func TestMissingSecretInitializesNothing(t *testing.T) {
	t.Parallel()

	pve := startProxmox(t, 104)
	uuid := pve.createVM("pve1", 104, "cp-1")

	client := fake.NewClientset(kubeletNode("cp-1", "proxmox://cloud/104", uuid, "127.0.9.2"))
	l := newLogs(t)
	run(t, client, ccmPod("cp-1"), l)

	l.wait("crash-looping", `secret "proxmox-ccm" not found`)

	calls := pve.srv.CallCount("GET /version")

	// a config the CCM refuses keeps it down too
	createSecret(t, client, configSecret("clusters:\n- url: "+pve.srv.URL()+"\n  region: cloud\n"))
	l.wait("crash-looping", "user, token or file credentials are required")

	if n := getNode(t, client, "cp-1"); initialized(n) || pve.srv.CallCount("GET /version") != calls {
		t.Fatalf("the CCM ran without its config: node %+v", n)
	}

	// a wrong token secret: Proxmox refuses every call, the Node stays as it is
	s := configSecret(pve.cloudConfig("00000000-0000-4000-8000-000000000000"))
	if _, err := client.CoreV1().Secrets("kube-system").Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	l.wait("failed to check proxmox cluster", "not authorized to access endpoint")
	l.wait("error syncing 'cp-1'", "not authorized")

	if n := getNode(t, client, "cp-1"); initialized(n) {
		t.Fatalf("initialized with a refused token: %+v", n)
	}
}

// cloud-node-lifecycle: a NotReady Node whose VM is gone is deleted; one whose VM is stopped gets
// the shutdown taint, which it loses once Ready.
func TestLifecycle(t *testing.T) {
	t.Parallel()

	pve := startProxmox(t, 104, 105)
	cp1 := pve.createVM("pve1", 104, "cp-1")
	w1 := pve.createVM("pve1", 105, "w-1")

	client := fake.NewClientset(configSecret(pve.cloudConfig(ccmSecret)),
		kubeletNode("cp-1", "proxmox://cloud/104", cp1, "127.0.9.2"), kubeletNode("w-1", "proxmox://cloud/105", w1, "127.0.9.3"))
	l := newLogs(t)
	run(t, client, ccmPod("cp-1", "--node-monitor-period=100ms"), l)

	waitNode(t, client, "w-1", func(n *corev1.Node) bool { return n != nil && initialized(n) })
	waitNode(t, client, "cp-1", func(n *corev1.Node) bool { return n != nil && initialized(n) })

	pve.root(http.MethodPost, "nodes/pve1/qemu/104/status/stop", nil)
	pve.waitEvent("stopped", 104)
	setReady(t, client, "cp-1", false)

	waitNode(t, client, "cp-1", func(n *corev1.Node) bool { return n != nil && hasTaint(n, ccmemu.ShutdownTaint) })
	setReady(t, client, "cp-1", true)
	waitNode(t, client, "cp-1", func(n *corev1.Node) bool { return n != nil && !hasTaint(n, ccmemu.ShutdownTaint) })

	pve.root(http.MethodPost, "nodes/pve1/qemu/105/status/stop", nil)
	pve.waitEvent("stopped", 105)
	pve.root(http.MethodDelete, "nodes/pve1/qemu/105", nil)
	pve.waitEvent("deleted", 105)
	setReady(t, client, "w-1", false)

	waitNode(t, client, "w-1", func(n *corev1.Node) bool { return n == nil })
	l.wait("deleting node since it is no longer present in cloud provider: w-1")

	if n := getNode(t, client, "cp-1"); n == nil {
		t.Fatal("cp-1 deleted")
	}
}

// Through the emulated kubelet: the CCM's pod runs on the node and initializes the Node the
// kubelet registered; once the pod is deleted the CCM stops (no more calls to Proxmox) and a new
// Node stays uninitialized.
func TestRunsWhileThePodRuns(t *testing.T) {
	t.Parallel()

	pve := startProxmox(t, 104, 105)
	cp1 := pve.createVM("pve1", 104, "cp-1")
	w1 := pve.createVM("pve1", 105, "w-1")

	client := fake.NewClientset(configSecret(pve.cloudConfig(ccmSecret)))
	l := newLogs(t)
	stopped := make(chan struct{})

	k, err := kubeletemu.Start(t.Context(), kubeletemu.Options{
		Client: client, NodeName: "cp-1", InternalIP: "127.0.9.2", KubeletVersion: "v1.34.1", ControlPlane: true,
		ExternalCloudProvider: true, ProviderID: "proxmox://cloud/104", SystemUUID: cp1, HeartbeatInterval: 50 * time.Millisecond,
		Containers: map[string]kubeletemu.ContainerFunc{
			ccmemu.Image: func(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c corev1.Container) {
				defer close(stopped)
				ccmemu.Run(ctx, client, pod, c, l.logf)
			},
		},
		Logf: l.logf,
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(k.Stop)

	pod := ccmPod("cp-1", "--node-monitor-period=50ms")
	if _, err := client.CoreV1().Pods("kube-system").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitNode(t, client, "cp-1", func(n *corev1.Node) bool {
		return n != nil && initialized(n) && n.Labels[corev1.LabelTopologyZone] == "pve1"
	})

	if err := client.CoreV1().Pods("kube-system").Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the CCM still runs after its pod was deleted")
	}

	calls := pve.srv.Calls()

	if _, err := client.CoreV1().Nodes().Create(t.Context(), kubeletNode("w-1", "", w1, "127.0.9.3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// several node monitor periods and heartbeats later: no call, the new Node as registered
	time.Sleep(300 * time.Millisecond)

	if after := pve.srv.Calls(); !maps.Equal(calls, after) {
		t.Fatalf("calls to Proxmox after the pod was deleted: %v, before %v", after, calls)
	}

	if n := getNode(t, client, "w-1"); initialized(n) {
		t.Fatalf("w-1 initialized without a CCM: %+v", n)
	}
}

func getNode(t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()

	n, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	return n
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

func createSecret(t *testing.T, client kubernetes.Interface, s *corev1.Secret) {
	t.Helper()

	if _, err := client.CoreV1().Secrets(s.Namespace).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// touchNode updates a Node (what a kubelet's heartbeat does), which the controller sees.
func touchNode(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()

	n := getNode(t, client, name)
	n.Annotations["lab/touched"] = time.Now().String()

	if _, err := client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setReady(t *testing.T, client kubernetes.Interface, name string, ready bool) {
	t.Helper()

	n := getNode(t, client, name)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}

	if ready {
		n.Status.Conditions[0].Status = corev1.ConditionTrue
	}

	if _, err := client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
