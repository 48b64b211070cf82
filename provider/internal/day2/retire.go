package day2

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// teardownMarker is the ConfigMap a cluster-wide teardown (`pulumi destroy`, or the component
// removed from the program) leaves in kube-system before the nodes go: per-node retirement then
// does nothing, so a destroy stays fast.
const teardownMarker = "talos-proxmox-teardown"

// markerTimeout bounds the marker's write and read: a cluster that does not answer is being torn
// down or is broken, and neither may hold up a destroy.
const markerTimeout = 5 * time.Second

// MarkTeardown records that the whole cluster is being torn down. Errors are returned for the
// log only: the teardown goes on.
func MarkTeardown(ctx context.Context, a Access) error {
	ctx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()

	kube, err := a.Kube()
	if err != nil {
		return err
	}

	_, err = kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: teardownMarker},
		Data:       map[string]string{"since": time.Now().UTC().Format(time.RFC3339)},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}

	return err
}

// Retire takes one node's previous instance out of the cluster before its VM is replaced (a node
// kept under its name on a new VM, e.g. on another Proxmox host): as Remove does, unless the
// cluster is being torn down, the node was already removed, or it is the only control plane
// (its replacement bootstraps a new cluster). It returns what it did, for the log.
func Retire(ctx context.Context, o RemoveOptions) (string, error) {
	if len(o.Leaving) != 1 {
		return "", fmt.Errorf("retire: one node at a time, not %d", len(o.Leaving))
	}

	n := o.Leaving[0]

	kube, err := o.Access.Kube()
	if err != nil {
		return "", err
	}

	mctx, cancel := context.WithTimeout(ctx, markerTimeout)
	_, err = kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(mctx, teardownMarker, metav1.GetOptions{})
	cancel()

	switch {
	case err == nil:
		return "the cluster is being torn down: nothing to do", nil
	case !apierrors.IsNotFound(err):
		return fmt.Sprintf("the cluster's API does not answer (%v): the previous instance is not retired; "+
			"its etcd member is replaced when the new one joins", err), nil
	}

	if len(o.Staying) == 0 {
		if o.Staying, err = controlPlaneNodes(ctx, kube); err != nil {
			return "", err
		}
	}

	var cps []Node

	for _, s := range o.Staying {
		if s.ControlPlane && s.Name != n.Name {
			cps = append(cps, s)
		}
	}

	o.Staying = slices.DeleteFunc(slices.Clone(o.Staying), func(s Node) bool { return s.Name == n.Name })

	if n.ControlPlane {
		if len(cps) == 0 {
			return "the only control plane: its new VM bootstraps the cluster again", nil
		}

		members, err := EtcdMembers(ctx, o.Access, cps, cps)
		if err != nil {
			return "", err
		}

		if !slices.ContainsFunc(members, func(m Member) bool { return m.Name == n.Name }) {
			return "not an etcd member any more: nothing to do", nil
		}
	} else if _, err := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return "no Node any more: nothing to do", nil
	}

	if _, err := Remove(ctx, o); err != nil { // warnings about fault tolerance are transient here
		return "", err
	}

	return "the previous instance left the cluster (drained, etcd left, reset, Node deleted) before its VM is replaced", nil
}

// controlPlaneNodes are the control planes Kubernetes knows, by their Nodes' internal addresses.
func controlPlaneNodes(ctx context.Context, kube kubernetes.Interface) ([]Node, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		return nil, fmt.Errorf("listing the control planes: %w", err)
	}

	var out []Node

	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				out = append(out, Node{Name: n.Name, Address: a.Address, ControlPlane: true})

				break
			}
		}
	}

	return out, nil
}
