package kubeletemu

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// notReadyMessage is the real kubelet's message while no CNI configuration exists.
const notReadyMessage = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"

const controlPlaneRole = "node-role.kubernetes.io/control-plane"

// UninitializedTaint is the taint a kubelet with --cloud-provider=external registers its Node
// with (k8s.io/cloud-provider's TaintExternalCloudProvider), value "true", effect NoSchedule; the
// cloud controller manager removes it once it initialized the Node.
const UninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// providedNodeIPAnnotation is k8s.io/cloud-provider's AnnotationAlphaProvidedIPAddr: the node IPs
// a kubelet with an external cloud provider was given, for the cloud controller manager.
const providedNodeIPAnnotation = "alpha.kubernetes.io/provided-node-ip"

// register creates the Node, or takes over the existing object (a node that rebooted), then
// publishes its status, lease and mirror pods.
func (k *Kubelet) register(ctx context.Context) error {
	nodes := k.opts.Client.CoreV1().Nodes()

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, k.opts.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = nodes.Create(ctx, k.desiredNode(&corev1.Node{}), metav1.CreateOptions{})

			return err
		}

		if err != nil {
			return err
		}

		_, err = nodes.Update(ctx, k.desiredNode(node), metav1.UpdateOptions{})

		return err
	})
	if err != nil {
		return err
	}

	if err := k.heartbeat(ctx); err != nil {
		return err
	}

	return k.syncMirrorPods(ctx)
}

// desiredNode sets what a kubelet owns on its Node object at registration.
func (k *Kubelet) desiredNode(node *corev1.Node) *corev1.Node {
	node = node.DeepCopy()
	node.Name = k.opts.NodeName

	labels := map[string]string{
		"kubernetes.io/hostname": k.opts.NodeName,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"beta.kubernetes.io/os":  "linux",
	}
	maps.Copy(labels, k.opts.Labels)

	if k.opts.ControlPlane {
		labels[controlPlaneRole] = ""
	}

	if node.Labels == nil {
		node.Labels = map[string]string{}
	}

	maps.Copy(node.Labels, labels)

	// The kubelet's initialNode: taints and providerID only when it creates the Node.
	if !node.CreationTimestamp.IsZero() {
		return node
	}

	switch {
	case k.opts.Taints != nil:
		node.Spec.Taints = append(node.Spec.Taints, k.opts.Taints...)
	case k.opts.ControlPlane && !k.opts.AllowSchedulingOnControlPlanes:
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: controlPlaneRole, Effect: corev1.TaintEffectNoSchedule})
	}

	if k.opts.ExternalCloudProvider {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}

	if k.opts.ProviderID != "" {
		node.Spec.ProviderID = k.opts.ProviderID
	}

	return node
}

// heartbeat renews the Lease and the Node's status, as a kubelet does.
func (k *Kubelet) heartbeat(ctx context.Context) error {
	if err := k.renewLease(ctx); err != nil {
		return err
	}

	ready := false

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := k.opts.Client.CoreV1().Nodes().Get(ctx, k.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}

		k.setStatus(node)
		ready = isReady(node)
		_, err = k.opts.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})

		return err
	})
	if err == nil && k.opts.OnStatus != nil {
		k.opts.OnStatus(ready)
	}

	return err
}

func isReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}

	return false
}

func (k *Kubelet) setStatus(node *corev1.Node) {
	now := metav1.Now()
	node.Status.Capacity = capacity()
	node.Status.Allocatable = capacity()
	k.setAddresses(node)

	k.mu.Lock()
	k.podCIDRs = slices.Clone(node.Spec.PodCIDRs)
	k.mu.Unlock()
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: k.opts.KubeletVersion, OSImage: k.opts.OSImage, ContainerRuntimeVersion: "containerd://2.1.4",
		KernelVersion: "6.12.0-talos", OperatingSystem: "linux", Architecture: "amd64",
		MachineID: k.opts.NodeName, SystemUUID: k.opts.NodeName, BootID: k.opts.BootID,
	}

	if k.opts.SystemUUID != "" {
		node.Status.NodeInfo.SystemUUID = k.opts.SystemUUID
	}

	if node.Status.NodeInfo.BootID == "" {
		node.Status.NodeInfo.BootID = k.opts.NodeName
	}

	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if !k.NetworkReady() {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: notReadyMessage}
	}

	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		ready,
	}

	for _, c := range want {
		c.LastHeartbeatTime = now
		c.LastTransitionTime = now

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

// setAddresses is the kubelet's NodeAddress status setter for a node given its node IPs
// (--node-ip, which Talos always passes): with an external cloud provider the IPs are announced
// in an annotation and the addresses are only set while the Node has none (the cloud controller
// manager's take precedence).
func (k *Kubelet) setAddresses(node *corev1.Node) {
	if k.opts.ExternalCloudProvider && len(k.opts.InternalIPs) > 0 {
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}

		node.Annotations[providedNodeIPAnnotation] = strings.Join(k.opts.InternalIPs, ",")
	} else {
		delete(node.Annotations, providedNodeIPAnnotation)
	}

	if k.opts.ExternalCloudProvider && len(node.Status.Addresses) > 0 {
		return
	}

	node.Status.Addresses = nil
	for _, ip := range k.opts.InternalIPs {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}

	node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: k.opts.NodeName})
}

func (k *Kubelet) renewLease(ctx context.Context) error {
	leases := k.opts.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	seconds := int32(max(40, 5*k.opts.HeartbeatInterval/time.Second))

	lease, err := leases.Get(ctx, k.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: k.opts.NodeName, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(k.opts.NodeName), LeaseDurationSeconds: ptr.To(seconds), RenewTime: &now,
			},
		}, metav1.CreateOptions{})

		return err
	}

	if err != nil {
		return err
	}

	lease.Spec.RenewTime = &now
	lease.Spec.HolderIdentity = ptr.To(k.opts.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(seconds)
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})

	return err
}
