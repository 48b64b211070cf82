package kubeletemu_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
)

// Pod IPs come from the node's pod CIDR (set by the controller manager's node IPAM; here by
// hand), one per pod, and a pod keeps its IP.
func TestPodIPsFromThePodCIDR(t *testing.T) {
	t.Parallel()

	c := newClient()
	start(t, kubeletemu.Options{Client: c, NodeName: "w-1", InternalIP: "127.0.9.3", CNIConfigured: true})

	node := getNode(t, c, "w-1")
	node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.244.3.0/24", []string{"10.244.3.0/24"}

	if _, err := c.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	time.Sleep(2 * heartbeat) // the kubelet's informer sees the CIDR

	cidr := netip.MustParsePrefix("10.244.3.0/24")
	seen := map[string]string{}

	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		createPod(t, c, "default", name, "w-1")
		eventually(t, 5*time.Second, name+" running", podRunning(t, c, "default", name))

		p, _ := getPod(t, c, "default", name)
		checkRunningStatus(t, p)

		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !cidr.Contains(ip) || ip == cidr.Addr() || ip == cidr.Addr().Next() || seen[ip.String()] != "" {
			t.Errorf("%s: pod IP %s (%v), IPs so far %v", name, p.Status.PodIP, err, seen)
		}

		seen[ip.String()] = name
	}
}

// A pod being deleted is finished after a short delay: its terminal status is posted, then it is
// deleted for good. A DaemonSet's pod likewise; a pod HungPod holds stays terminating.
func TestDeletedPodsAreFinished(t *testing.T) {
	t.Parallel()

	c := newClient()
	start(t, kubeletemu.Options{
		Client: c, NodeName: "w-1", InternalIP: "127.0.9.3", CNIConfigured: true,
		HungPod: func(p *corev1.Pod) bool { return p.Labels["hang"] == "true" },
	})

	createPod(t, c, "default", "web", "w-1")
	createPod(t, c, "kube-system", "kube-proxy-x", "w-1", func(p *corev1.Pod) {
		p.Spec.HostNetwork = true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-proxy", UID: "ds", Controller: ptr.To(true)}}
	})
	createPod(t, c, "default", "stuck", "w-1", func(p *corev1.Pod) { p.Labels = map[string]string{"hang": "true"} })

	for _, p := range [][2]string{{"default", "web"}, {"kube-system", "kube-proxy-x"}, {"default", "stuck"}} {
		eventually(t, 5*time.Second, p[1]+" running", podRunning(t, c, p[0], p[1]))
	}

	w, err := c.CoreV1().Pods("default").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	for _, p := range [][2]string{{"default", "web"}, {"kube-system", "kube-proxy-x"}, {"default", "stuck"}} {
		if err := c.CoreV1().Pods(p[0]).Delete(t.Context(), p[1], metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// web: terminating, then Succeeded with its containers terminated, then gone.
	var phases []corev1.PodPhase

	timeout := time.After(5 * time.Second)

	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Name != "web" {
				continue
			}

			if ev.Type == watch.Deleted {
				done = true

				continue
			}

			if p.DeletionTimestamp != nil {
				phases = append(phases, p.Status.Phase)

				if p.Status.Phase == corev1.PodSucceeded && p.Status.ContainerStatuses[0].State.Terminated == nil {
					t.Errorf("terminal status with running containers: %+v", p.Status.ContainerStatuses)
				}
			}
		case <-timeout:
			t.Fatalf("web never deleted; phases while terminating %v", phases)
		}
	}

	if len(phases) < 2 || phases[0] != corev1.PodRunning || phases[len(phases)-1] != corev1.PodSucceeded {
		t.Errorf("phases while terminating %v, want Running … Succeeded", phases)
	}

	eventually(t, 5*time.Second, "DaemonSet pod finished", podGone(t, c, "kube-system", "kube-proxy-x"))

	time.Sleep(time.Second)

	p, err := getPod(t, c, "default", "stuck")
	if err != nil || p.DeletionTimestamp == nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("hung pod: %v, %v", p, err)
	}
}

// What the node lifecycle controller changes while a node is unreachable, the kubelet puts right
// once it runs: a pod marked not ready is ready again, a Node whose Ready condition was set
// Unknown is posted Ready again.
func TestStatusRestored(t *testing.T) {
	t.Parallel()

	c := newClient()
	start(t, kubeletemu.Options{Client: c, NodeName: "w-1", InternalIP: "127.0.9.3", CNIConfigured: true})

	createPod(t, c, "default", "web", "w-1")
	eventually(t, 5*time.Second, "web running", podRunning(t, c, "default", "web"))

	p, _ := getPod(t, c, "default", "web")
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}

	if _, err := c.CoreV1().Pods("default").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, 5*time.Second, "web ready again", podRunning(t, c, "default", "web"))

	n := getNode(t, c, "w-1")
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
		}
	}

	if _, err := c.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, 5*time.Second, "node Ready again", nodeReady(t, c, "w-1", corev1.ConditionTrue))
}

// A pod whose readiness gate is not satisfied runs but is not Ready, until the gate's condition
// is True.
func TestReadinessGates(t *testing.T) {
	t.Parallel()

	c := newClient()
	start(t, kubeletemu.Options{Client: c, NodeName: "w-1", InternalIP: "127.0.9.3", CNIConfigured: true})

	createPod(t, c, "default", "gated", "w-1", func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/ready"}}
	})

	eventually(t, 5*time.Second, "gated running", func() error {
		p, err := getPod(t, c, "default", "gated")
		if err != nil {
			return err
		}

		if p.Status.Phase != corev1.PodRunning || podCondition(p, corev1.ContainersReady) != corev1.ConditionTrue || podCondition(p, corev1.PodReady) != corev1.ConditionFalse {
			return fmt.Errorf("phase %s, conditions %+v", p.Status.Phase, p.Status.Conditions)
		}

		return nil
	})

	p, _ := getPod(t, c, "default", "gated")
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "example.com/ready", Status: corev1.ConditionTrue})

	if _, err := c.CoreV1().Pods("default").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, 5*time.Second, "gated ready", podRunning(t, c, "default", "gated"))
}

// In steady state a kubelet reads nothing from the API server (its informers have it all) and
// writes its Lease every heartbeat and its Node status every few heartbeats.
func TestSteadyStateAPICalls(t *testing.T) {
	t.Parallel()

	c := newClient()
	start(t, kubeletemu.Options{
		Client: c, NodeName: "cp-1", InternalIP: "127.0.9.2", CNIConfigured: true, ControlPlane: true,
		StaticPods: []kubeletemu.StaticPod{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.34.1"}},
	})

	createPod(t, c, "default", "web", "cp-1")
	eventually(t, 5*time.Second, "web running", podRunning(t, c, "default", "web"))
	time.Sleep(2 * heartbeat)

	c.ClearActions()
	time.Sleep(30 * heartbeat)

	counts := map[string]int{}
	for _, a := range c.Actions() {
		key := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			key += "/" + a.GetSubresource()
		}

		counts[key]++
	}

	leases, status := counts["update leases"], counts["update nodes/status"]
	delete(counts, "update leases")
	delete(counts, "update nodes/status")

	if leases < 10 || leases > 31 || status < 3 || status > leases/3+2 || len(counts) != 0 {
		t.Errorf("API calls in 30 heartbeats: %d lease updates, %d node status updates, others %v", leases, status, counts)
	}
}
