package kubeletemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// notReadyMessage is the real kubelet's message while no CNI configuration exists.
const notReadyMessage = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"

// leaseDurationSeconds is the kubelet's default node lease duration.
const leaseDurationSeconds = 40

// syncStatus posts the Node status when it differs from what the API server has (a condition
// the node lifecycle controller changed, the network that became ready), or always with force.
// The Node is read from the kubelet's informer, from the API server after a conflict.
func (k *Kubelet) syncStatus(ctx context.Context, force bool) error {
	network := k.NetworkReady()

	k.mu.Lock()
	changed := network != k.lastNetwork
	k.mu.Unlock()

	if changed && network {
		k.enqueueAllPods() // pods that waited for the network
	}

	fresh := false

	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := k.currentNode(ctx, fresh)
		if err != nil {
			return err
		}

		want := cur.DeepCopy()
		k.applyStatus(want, metav1.Now(), network)

		if !force && !changed && !statusDiffers(cur, want) {
			return nil
		}

		_, err = k.opts.Client.CoreV1().Nodes().UpdateStatus(ctx, want, metav1.UpdateOptions{})
		fresh = apierrors.IsConflict(err)

		return err
	})
	if err != nil {
		return fmt.Errorf("updating the status of Node %s: %w", k.opts.NodeName, err)
	}

	k.mu.Lock()
	k.lastNetwork = network
	k.mu.Unlock()

	return nil
}

// currentNode is the kubelet's Node: the informer's copy, or the API server's when fresh or when
// the informer has none.
func (k *Kubelet) currentNode(ctx context.Context, fresh bool) (*corev1.Node, error) {
	if !fresh && k.nodes != nil {
		if obj, ok, _ := k.nodes.GetStore().GetByKey(k.opts.NodeName); ok {
			if node, ok := obj.(*corev1.Node); ok {
				return node, nil
			}
		}
	}

	return k.opts.Client.CoreV1().Nodes().Get(ctx, k.opts.NodeName, metav1.GetOptions{})
}

// applyStatus sets the status a kubelet posts: addresses, capacity, nodeInfo and conditions, the
// conditions' heartbeat at now (their transition time kept while their status holds).
func (k *Kubelet) applyStatus(node *corev1.Node, now metav1.Time, networkReady bool) {
	node.Status.Capacity = k.capacity()
	node.Status.Allocatable = allocatable(node.Status.Capacity)
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: k.opts.InternalIP},
		{Type: corev1.NodeHostName, Address: k.opts.NodeName},
	}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250

	id := sha256.Sum256([]byte("kubeletemu/" + k.opts.NodeName))
	machineID := hex.EncodeToString(id[:16])
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		MachineID:               machineID,
		SystemUUID:              fmt.Sprintf("%s-%s-%s-%s-%s", machineID[:8], machineID[8:12], machineID[12:16], machineID[16:20], machineID[20:]),
		BootID:                  k.bootID,
		KernelVersion:           k.opts.KernelVersion,
		OSImage:                 k.opts.OSImage,
		ContainerRuntimeVersion: k.opts.ContainerRuntimeVersion,
		KubeletVersion:          k.opts.KubeletVersion,
		OperatingSystem:         "linux",
		Architecture:            "amd64",
	}

	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if !networkReady {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: notReadyMessage}
	}

	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		ready,
	}

	for _, c := range want {
		c.LastHeartbeatTime, c.LastTransitionTime = now, now

		found := false

		for i := range node.Status.Conditions {
			old := &node.Status.Conditions[i]
			if old.Type != c.Type {
				continue
			}

			found = true

			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}

			*old = c
		}

		if !found {
			node.Status.Conditions = append(node.Status.Conditions, c)
		}
	}
}

// statusDiffers reports whether two Node statuses differ in more than their heartbeat times.
func statusDiffers(a, b *corev1.Node) bool {
	strip := func(n *corev1.Node) corev1.NodeStatus {
		s := *n.Status.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}

		return s
	}

	return !apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// capacity is the default capacity with Options.Capacity's overrides.
func (k *Kubelet) capacity() corev1.ResourceList {
	c := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("2"),
		corev1.ResourceMemory:           resource.MustParse("4Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		"hugepages-1Gi":                 resource.MustParse("0"),
		"hugepages-2Mi":                 resource.MustParse("0"),
	}

	for name, q := range k.opts.Capacity {
		c[name] = q.DeepCopy()
	}

	return c
}

// allocatable is capacity minus Talos' system reservation (CPU 50m, memory 192Mi, ephemeral
// storage 256Mi) and the kubelet's hard eviction threshold for memory (100Mi).
func allocatable(capacity corev1.ResourceList) corev1.ResourceList {
	reserved := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("50m"),
		corev1.ResourceMemory:           resource.MustParse("292Mi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("256Mi"),
	}

	out := capacity.DeepCopy()

	for name, r := range reserved {
		if q, ok := out[name]; ok && q.Cmp(r) > 0 {
			q.Sub(r)
			out[name] = q
		}
	}

	return out
}

// renewLease renews the node's Lease in kube-node-lease, creating it if missing. The last Lease
// written is kept, so that a renewal is a single update, as with the kubelet's lease controller.
func (k *Kubelet) renewLease(ctx context.Context) error {
	leases := k.opts.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())

	if k.lease != nil {
		lease := k.lease.DeepCopy()
		lease.Spec.RenewTime = &now

		updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
		if err == nil {
			k.lease = updated

			return nil
		}

		k.lease = nil

		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("renewing Lease %s: %w", k.opts.NodeName, err)
		}
	}

	lease, err := leases.Get(ctx, k.opts.NodeName, metav1.GetOptions{})

	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k.opts.NodeName, Namespace: corev1.NamespaceNodeLease}}
		k.setLeaseSpec(lease, now)
		lease, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	case err == nil:
		lease = lease.DeepCopy()
		k.setLeaseSpec(lease, now)
		lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}

	if err != nil {
		return fmt.Errorf("renewing Lease %s: %w", k.opts.NodeName, err)
	}

	k.lease = lease

	return nil
}

// setLeaseSpec makes lease this node's, renewed at now and owned by the Node (so that the
// garbage collector removes it with the Node).
func (k *Kubelet) setLeaseSpec(lease *coordinationv1.Lease, now metav1.MicroTime) {
	lease.Spec.HolderIdentity = ptr.To(k.opts.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](leaseDurationSeconds)
	lease.Spec.RenewTime = &now

	if k.nodeUID != "" {
		lease.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: k.opts.NodeName, UID: k.nodeUID,
		}}
	}
}
