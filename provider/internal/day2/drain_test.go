package day2

import (
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// drainCluster is a fake API server with one node and its pods: an eviction is refused with 429
// (a PodDisruptionBudget) as often as refusals says, and an accepted one deletes the pod a
// moment later, as its kubelet would, unless the pod hangs.
type drainCluster struct {
	kube     *fake.Clientset
	mu       sync.Mutex
	refusals map[string]int
	hangs    map[string]bool
	evicted  map[string]int
}

func newDrainCluster(t *testing.T, pods ...*corev1.Pod) *drainCluster {
	t.Helper()

	objs := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-1"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "default"}},
	}
	for _, p := range pods {
		objs = append(objs, p)
	}

	d := &drainCluster{kube: fake.NewClientset(objs...), refusals: map[string]int{}, hangs: map[string]bool{}, evicted: map[string]int{}}
	d.kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "pods/eviction", Kind: "Eviction", Group: "policy", Version: "v1"}},
	}}

	d.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}

		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)

		d.mu.Lock()
		defer d.mu.Unlock()

		d.evicted[ev.Name]++

		if d.refusals[ev.Name] > 0 {
			d.refusals[ev.Name]--

			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
		}

		if !d.hangs[ev.Name] {
			go func() {
				time.Sleep(150 * time.Millisecond)

				_ = d.kube.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ev.Namespace, ev.Name)
			}()
		}

		return true, nil, nil
	})

	return d
}

func replicaPod(name string) *corev1.Pod {
	yes := true

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", Controller: &yes}},
		},
		Spec:   corev1.PodSpec{NodeName: "w-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func daemonPod(name string) *corev1.Pod {
	p := replicaPod(name)
	p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name = "DaemonSet", "ds"

	return p
}

func TestDrainEvictsAndWaitsForThePodsToGo(t *testing.T) {
	d := newDrainCluster(t, replicaPod("web"), replicaPod("guarded"), daemonPod("proxy"))
	d.refusals["guarded"] = 1

	var said []string

	if err := Drain(t.Context(), d.kube, "w-1", time.Minute, func(m string) { said = append(said, m) }); err != nil {
		t.Fatal(err)
	}

	pods, err := d.kube.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Name)
	}

	if strings.Join(left, ",") != "proxy" {
		t.Errorf("pods after the drain: %v, want only the DaemonSet's", left)
	}

	if d.evicted["web"] != 1 || d.evicted["guarded"] != 2 || d.evicted["proxy"] != 0 {
		t.Errorf("evictions: %v, want web once, guarded twice (refused once by its budget), the DaemonSet pod never", d.evicted)
	}

	node, err := d.kube.CoreV1().Nodes().Get(t.Context(), "w-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if !node.Spec.Unschedulable {
		t.Error("the drained node is not cordoned")
	}

	if joined := strings.Join(said, "\n"); !strings.Contains(joined, "evicting default/web") || !strings.Contains(joined, "ignoring DaemonSet-managed Pods") {
		t.Errorf("progress does not name the evictions and the ignored pods:\n%s", joined)
	}
}

func TestDrainTimesOutNamingThePodThatStays(t *testing.T) {
	d := newDrainCluster(t, replicaPod("web"), replicaPod("stuck"))
	d.hangs["stuck"] = true

	err := Drain(t.Context(), d.kube, "w-1", time.Second, nil)
	if err == nil {
		t.Fatal("the drain passed although a pod never terminates")
	}

	if msg := err.Error(); !strings.Contains(msg, "draining node w-1") || !strings.Contains(msg, "still on the node after 1s: default/stuck") ||
		strings.Contains(msg, "default/web") {
		t.Errorf("the error does not name the node and only the pod that stayed: %v", err)
	}
}

func TestDrainTimesOutWhileABudgetRefuses(t *testing.T) {
	d := newDrainCluster(t, replicaPod("guarded"))
	d.refusals["guarded"] = 1000

	err := Drain(t.Context(), d.kube, "w-1", 1500*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "disruption budget") || !strings.Contains(err.Error(), "default/guarded") {
		t.Fatalf("want an error naming the budget's refusal and the pod, got %v", err)
	}

	if d.evicted["guarded"] < 2 {
		t.Errorf("the refused eviction was asked %d times, want it asked again", d.evicted["guarded"])
	}
}
