package kubeletemu_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
)

// heartbeat is the tests' heartbeat interval.
const heartbeat = 50 * time.Millisecond

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// newClient is client-go's fake clientset with what the kubelet relies on in a real API server
// and the fake lacks: UIDs and creation timestamps on create, new pods Pending, status updates
// that change only the status (the fake replaces the whole object), and graceful deletion of
// pods bound to a node (the fake deletes at once): such a delete only sets deletionTimestamp,
// and the pod goes once deleted with a zero grace period (by its kubelet), honouring a UID
// precondition. The fake still does not filter watches by field and runs no controllers.
func newClient() *fake.Clientset {
	c := fake.NewClientset()

	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || ca.GetSubresource() != "" {
			return false, nil, nil
		}

		if m, err := meta.Accessor(ca.GetObject()); err == nil {
			if m.GetUID() == "" {
				m.SetUID(uuid.NewUUID())
			}

			if m.GetCreationTimestamp().IsZero() {
				m.SetCreationTimestamp(metav1.Now())
			}
		}

		if pod, ok := ca.GetObject().(*corev1.Pod); ok {
			pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
		}

		return false, nil, nil
	})

	c.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ua, ok := a.(k8stesting.UpdateAction)
		if !ok || ua.GetSubresource() != "status" {
			return false, nil, nil
		}

		m, err := meta.Accessor(ua.GetObject())
		if err != nil {
			return false, nil, nil
		}

		stored, err := c.Tracker().Get(ua.GetResource(), ua.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}

		var merged runtime.Object

		switch s := stored.(type) {
		case *corev1.Pod:
			p := s.DeepCopy()
			p.Status = ua.GetObject().(*corev1.Pod).Status
			merged = p
		case *corev1.Node:
			n := s.DeepCopy()
			n.Status = ua.GetObject().(*corev1.Node).Status
			merged = n
		default:
			return false, nil, nil
		}

		return true, merged.DeepCopyObject(), c.Tracker().Update(ua.GetResource(), merged, ua.GetNamespace())
	})

	c.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		da, ok := a.(k8stesting.DeleteActionImpl)
		if !ok {
			return false, nil, nil
		}

		obj, err := c.Tracker().Get(podsResource, da.GetNamespace(), da.GetName())
		if err != nil {
			return false, nil, nil // the fake's NotFound
		}

		pod := obj.(*corev1.Pod).DeepCopy()
		if pre := da.DeleteOptions.Preconditions; pre != nil && pre.UID != nil && *pre.UID != pod.UID {
			return true, nil, apierrors.NewConflict(podsResource.GroupResource(), pod.Name,
				fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, pod.UID))
		}

		grace := ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30)
		if g := da.DeleteOptions.GracePeriodSeconds; g != nil {
			grace = *g
		}

		if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			grace = 0
		}

		if grace == 0 {
			return false, nil, nil // deleted at once
		}

		if pod.DeletionTimestamp != nil {
			return true, nil, nil
		}

		ts := metav1.NewTime(time.Now().Add(time.Duration(grace) * time.Second))
		pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &ts, &grace

		return true, nil, c.Tracker().Update(podsResource, pod, pod.Namespace)
	})

	return c
}

// start starts a kubelet with the tests' heartbeat, stopped when the test ends.
func start(t *testing.T, opts kubeletemu.Options) *kubeletemu.Kubelet {
	t.Helper()

	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = heartbeat
	}

	if opts.InternalIP == "" {
		opts.InternalIP = "127.0.9.2"
	}

	opts.Logf = t.Logf

	k, err := kubeletemu.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(k.Stop)

	return k
}

// eventually retries check until it returns nil, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()

	deadline := time.Now().Add(timeout)

	for {
		err := check()
		if err == nil {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}

		time.Sleep(10 * time.Millisecond)
	}
}

// createPod creates a pod bound to node (one container "app", image nginx:1.27), after mutate.
func createPod(t *testing.T, c *fake.Clientset, ns, name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
	}

	for _, m := range mutate {
		m(pod)
	}

	created, err := c.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	return created
}

// cniPod makes a pod a CNI agent: host network, /etc/cni/net.d mounted, owned by a DaemonSet.
func cniPod(pod *corev1.Pod) {
	pod.Spec.HostNetwork = true
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name: "cni", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/cni/net.d"}},
	})
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-flannel", UID: "ds-uid", Controller: ptr.To(true)}}
}

func getPod(t *testing.T, c *fake.Clientset, ns, name string) (*corev1.Pod, error) {
	t.Helper()

	return c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
}

func getNode(t *testing.T, c *fake.Clientset, name string) *corev1.Node {
	t.Helper()

	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	return n
}

// podRunning checks the pod is Running and Ready.
func podRunning(t *testing.T, c *fake.Clientset, ns, name string) func() error {
	return func() error {
		p, err := getPod(t, c, ns, name)
		if err != nil {
			return err
		}

		if p.Status.Phase != corev1.PodRunning || podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
			return fmt.Errorf("pod %s: phase %q, ready %q", name, p.Status.Phase, podCondition(p, corev1.PodReady))
		}

		return nil
	}
}

func podGone(t *testing.T, c *fake.Clientset, ns, name string) func() error {
	return func() error {
		p, err := getPod(t, c, ns, name)
		if apierrors.IsNotFound(err) {
			return nil
		}

		if err != nil {
			return err
		}

		return fmt.Errorf("pod %s still there (phase %s, deleting %v)", name, p.Status.Phase, p.DeletionTimestamp != nil)
	}
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}

	return nil
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}

	return ""
}

// nodeReady checks the node's Ready condition has the wanted status.
func nodeReady(t *testing.T, c *fake.Clientset, name string, want corev1.ConditionStatus) func() error {
	return func() error {
		r := nodeCondition(getNode(t, c, name), corev1.NodeReady)
		if r == nil || r.Status != want {
			return fmt.Errorf("node %s Ready condition %+v, want %s", name, r, want)
		}

		return nil
	}
}

// testWriter sends drain's output to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))

	return len(p), nil
}
