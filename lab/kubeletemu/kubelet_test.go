package kubeletemu_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
)

const cniNotReady = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"

// Registration as a kubelet does it: the kubelet's labels and Talos', the control-plane taint
// and Options' taints, capacity, nodeInfo, addresses, the pressure conditions, NotReady with
// the kubelet's own message while no CNI runs, and a Lease owned by the Node.
func TestRegistration(t *testing.T) {
	t.Parallel()

	c := newClient()
	dedicated := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute}
	start(t, kubeletemu.Options{
		Client: c, NodeName: "cp-1", InternalIP: "127.0.9.2", KubeletVersion: "v1.34.1", OSImage: "Talos (v1.11.5)",
		ControlPlane: true, Labels: map[string]string{"topology.kubernetes.io/zone": "lab"},
		Taints: []corev1.Taint{dedicated}, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
	})

	n := getNode(t, c, "cp-1")

	for k, v := range map[string]string{
		"kubernetes.io/hostname": "cp-1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node-role.kubernetes.io/control-plane": "", "topology.kubernetes.io/zone": "lab",
	} {
		if got, ok := n.Labels[k]; !ok || got != v {
			t.Errorf("label %s = %q (%v), want %q", k, got, ok, v)
		}
	}

	cp := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	if len(n.Spec.Taints) != 2 || !n.Spec.Taints[0].MatchTaint(&cp) || !n.Spec.Taints[1].MatchTaint(&dedicated) {
		t.Errorf("taints %v", n.Spec.Taints)
	}

	info := n.Status.NodeInfo
	if info.KubeletVersion != "v1.34.1" || info.KubeProxyVersion != "" || info.OSImage != "Talos (v1.11.5)" ||
		info.ContainerRuntimeVersion != "containerd://2.1.4" || info.KernelVersion == "" ||
		info.OperatingSystem != "linux" || info.Architecture != "amd64" || info.BootID == "" || info.MachineID == "" {
		t.Errorf("nodeInfo %+v", info)
	}

	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.9.2"}, {Type: corev1.NodeHostName, Address: "cp-1"}}
	if !slices.Equal(n.Status.Addresses, wantAddrs) {
		t.Errorf("addresses %v", n.Status.Addresses)
	}

	capacity, alloc := n.Status.Capacity, n.Status.Allocatable
	if capacity.Cpu().String() != "4" || capacity.Memory().String() != "4Gi" || capacity.Pods().String() != "110" ||
		alloc.Cpu().String() != "3950m" || alloc.Pods().String() != "110" || alloc.Memory().Cmp(*capacity.Memory()) >= 0 {
		t.Errorf("capacity %v, allocatable %v", capacity, alloc)
	}

	for _, ct := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if cond := nodeCondition(n, ct); cond == nil || cond.Status != corev1.ConditionFalse {
			t.Errorf("condition %s: %+v", ct, cond)
		}
	}

	ready := nodeCondition(n, corev1.NodeReady)
	if ready == nil || ready.Status != corev1.ConditionFalse || ready.Reason != "KubeletNotReady" || ready.Message != cniNotReady {
		t.Errorf("Ready condition %+v", ready)
	}

	lease, err := c.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "cp-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if *lease.Spec.HolderIdentity != "cp-1" || lease.Spec.RenewTime == nil || *lease.Spec.LeaseDurationSeconds != 40 ||
		len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != n.UID {
		t.Errorf("lease %+v", lease)
	}
}

// A control plane that allows scheduling has the role label but no taint; a worker neither.
func TestNoControlPlaneTaint(t *testing.T) {
	t.Parallel()

	c := newClient()
	start(t, kubeletemu.Options{Client: c, NodeName: "cp-1", ControlPlane: true, AllowSchedulingOnControlPlanes: true})
	start(t, kubeletemu.Options{Client: c, NodeName: "w-1", InternalIP: "127.0.9.3"})

	cp, w := getNode(t, c, "cp-1"), getNode(t, c, "w-1")
	if _, ok := cp.Labels["node-role.kubernetes.io/control-plane"]; !ok || len(cp.Spec.Taints) != 0 {
		t.Errorf("cp-1: labels %v, taints %v", cp.Labels, cp.Spec.Taints)
	}

	if _, ok := w.Labels["node-role.kubernetes.io/control-plane"]; ok || len(w.Spec.Taints) != 0 {
		t.Errorf("w-1: labels %v, taints %v", w.Labels, w.Spec.Taints)
	}
}

// The built-in network rule: a pod stays Pending (acknowledged, its containers being created)
// while the network is not ready, a host-network pod runs regardless, a pod that mounts a
// hostPath other than /etc/cni/net.d changes nothing, and once a CNI agent (host network,
// /etc/cni/net.d mounted) runs the node turns Ready and the waiting pod runs.
func TestCNIMakesTheNodeReady(t *testing.T) {
	t.Parallel()

	c := newClient()
	k := start(t, kubeletemu.Options{Client: c, NodeName: "w-1", InternalIP: "127.0.9.3"})

	createPod(t, c, "default", "web", "w-1", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.37"}}
	})

	eventually(t, 5*time.Second, "web acknowledged", func() error {
		p, err := getPod(t, c, "default", "web")
		if err != nil {
			return err
		}

		if p.Status.StartTime == nil || p.Status.HostIP != "127.0.9.3" || len(p.Status.ContainerStatuses) != 1 ||
			p.Status.ContainerStatuses[0].State.Waiting == nil {
			return fmt.Errorf("status %+v", p.Status)
		}

		return nil
	})

	createPod(t, c, "default", "etc-cni", "w-1", func(p *corev1.Pod) {
		p.Spec.HostNetwork = true
		p.Spec.Volumes = []corev1.Volume{{Name: "etc", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/cni"}}}}
	})
	eventually(t, 5*time.Second, "host-network pod running", podRunning(t, c, "default", "etc-cni"))

	time.Sleep(5 * heartbeat)

	if p, _ := getPod(t, c, "default", "web"); p.Status.Phase != corev1.PodPending || k.Ready() {
		t.Fatalf("web %s and node ready %v before any CNI ran", p.Status.Phase, k.Ready())
	}

	createPod(t, c, "kube-system", "kube-flannel-abcde", "w-1", cniPod)
	eventually(t, 5*time.Second, "CNI pod running", podRunning(t, c, "kube-system", "kube-flannel-abcde"))
	eventually(t, 5*time.Second, "node Ready", nodeReady(t, c, "w-1", corev1.ConditionTrue))

	if ready := nodeCondition(getNode(t, c, "w-1"), corev1.NodeReady); ready.Reason != "KubeletReady" || !k.Ready() || !k.NetworkReady() {
		t.Errorf("Ready condition %+v, Ready() %v", ready, k.Ready())
	}

	eventually(t, 5*time.Second, "web running", podRunning(t, c, "default", "web"))

	flannel, _ := getPod(t, c, "kube-system", "kube-flannel-abcde")
	if flannel.Status.PodIP != "127.0.9.3" || flannel.Status.HostIP != "127.0.9.3" {
		t.Errorf("host-network pod IPs %s/%s", flannel.Status.PodIP, flannel.Status.HostIP)
	}

	web, _ := getPod(t, c, "default", "web")
	checkRunningStatus(t, web)

	if s := web.Status.InitContainerStatuses; len(s) != 1 || s[0].State.Terminated == nil || s[0].State.Terminated.Reason != "Completed" {
		t.Errorf("init container statuses %+v", s)
	}
}

// checkRunningStatus checks what a kubelet reports of a running pod on w-1 (not host network).
func checkRunningStatus(t *testing.T, p *corev1.Pod) {
	t.Helper()

	s := p.Status
	if s.Phase != corev1.PodRunning || s.HostIP != "127.0.9.3" || s.PodIP == "" || s.PodIP == s.HostIP || s.StartTime == nil {
		t.Errorf("%s: phase %s, podIP %s, hostIP %s, start %v", p.Name, s.Phase, s.PodIP, s.HostIP, s.StartTime)
	}

	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if podCondition(p, ct) != corev1.ConditionTrue {
			t.Errorf("%s: condition %s is %q", p.Name, ct, podCondition(p, ct))
		}
	}

	if len(s.ContainerStatuses) != len(p.Spec.Containers) {
		t.Fatalf("%s: container statuses %+v", p.Name, s.ContainerStatuses)
	}

	for _, cs := range s.ContainerStatuses {
		if !cs.Ready || cs.Started == nil || !*cs.Started || cs.State.Running == nil || cs.Image == "" || cs.ImageID == "" || cs.ContainerID == "" {
			t.Errorf("%s: container status %+v", p.Name, cs)
		}
	}
}

// Options.NetworkReady replaces the built-in rule; CNIConfigured makes the node Ready at once.
func TestNetworkReadyOptions(t *testing.T) {
	t.Parallel()

	c := newClient()

	var network atomic.Bool

	k := start(t, kubeletemu.Options{Client: c, NodeName: "w-1", InternalIP: "127.0.9.3", NetworkReady: network.Load})
	createPod(t, c, "default", "web", "w-1")

	time.Sleep(5 * heartbeat)

	if p, _ := getPod(t, c, "default", "web"); p.Status.Phase != corev1.PodPending || k.Ready() {
		t.Fatalf("web %s, ready %v with the network not ready", p.Status.Phase, k.Ready())
	}

	network.Store(true)
	eventually(t, 5*time.Second, "node Ready", nodeReady(t, c, "w-1", corev1.ConditionTrue))
	eventually(t, 5*time.Second, "web running", podRunning(t, c, "default", "web"))

	start(t, kubeletemu.Options{Client: c, NodeName: "w-2", InternalIP: "127.0.9.4", CNIConfigured: true})

	if err := nodeReady(t, c, "w-2", corev1.ConditionTrue)(); err != nil {
		t.Errorf("with CNIConfigured: %v", err)
	}
}

// Stop ends the heartbeats without a word to the API server: the Lease is no longer renewed, the
// Node keeps its last status (the node lifecycle controller's to change) and new pods stay as
// they are. A new kubelet re-registers the same Node, with a new boot ID, and renews again.
func TestStopAndRestart(t *testing.T) {
	t.Parallel()

	c := newClient()
	opts := kubeletemu.Options{Client: c, NodeName: "w-1", InternalIP: "127.0.9.3", CNIConfigured: true, ControlPlane: true}
	k := start(t, opts)

	renewTime := func() time.Time {
		l, err := c.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "w-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}

		return l.Spec.RenewTime.Time
	}

	first := renewTime()
	eventually(t, 5*time.Second, "lease renewed", func() error {
		if !renewTime().After(first) {
			return fmt.Errorf("lease not renewed")
		}

		return nil
	})

	before := getNode(t, c, "w-1")

	k.Stop()
	k.Stop()

	if k.Ready() {
		t.Error("Ready() after Stop")
	}

	stopped := renewTime()
	atStop := nodeCondition(getNode(t, c, "w-1"), corev1.NodeReady)

	createPod(t, c, "default", "late", "w-1")
	time.Sleep(6 * heartbeat)

	if !renewTime().Equal(stopped) {
		t.Error("the lease was renewed after Stop")
	}

	if r := nodeCondition(getNode(t, c, "w-1"), corev1.NodeReady); r.Status != corev1.ConditionTrue || !r.LastHeartbeatTime.Equal(&atStop.LastHeartbeatTime) {
		t.Errorf("Ready condition after Stop %+v, at Stop %+v", r, atStop)
	}

	if p, _ := getPod(t, c, "default", "late"); p.Status.Phase != corev1.PodPending {
		t.Errorf("a pod ran on a stopped kubelet: %s", p.Status.Phase)
	}

	start(t, opts)

	again := getNode(t, c, "w-1")
	if again.UID != before.UID || again.Status.NodeInfo.BootID == before.Status.NodeInfo.BootID || len(again.Spec.Taints) != 1 {
		t.Errorf("re-registered node: uid %s→%s, boot %s→%s, taints %v", before.UID, again.UID,
			before.Status.NodeInfo.BootID, again.Status.NodeInfo.BootID, again.Spec.Taints)
	}

	eventually(t, 5*time.Second, "lease renewed after the restart", func() error {
		if !renewTime().After(stopped) {
			return fmt.Errorf("lease not renewed")
		}

		return nil
	})
	eventually(t, 5*time.Second, "late pod running", podRunning(t, c, "default", "late"))
}
