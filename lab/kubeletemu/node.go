package kubeletemu

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

const (
	// controlPlaneRole is the control-plane role label and the key of the control-plane taint.
	controlPlaneRole = "node-role.kubernetes.io/control-plane"
	// attachDetachAnnotation is set by kubelets that let the controller attach volumes.
	attachDetachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"
)

// register creates the Node with its status, as a kubelet registers, or takes over the existing
// object (a node that rebooted): its own labels, Options.Labels and the taints are reconciled;
// the status is posted next, by Start.
func (k *Kubelet) register(ctx context.Context) error {
	nodes := k.opts.Client.CoreV1().Nodes()

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.opts.NodeName}}
	k.reconcileMeta(node)
	k.applyStatus(node, metav1.Now(), k.NetworkReady())

	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		k.nodeUID = created.UID

		return nil
	}

	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Node %s: %w", k.opts.NodeName, err)
	}

	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, k.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}

		k.nodeUID = cur.UID

		want := cur.DeepCopy()
		k.reconcileMeta(want)

		if apiequality.Semantic.DeepEqual(cur.ObjectMeta, want.ObjectMeta) && apiequality.Semantic.DeepEqual(cur.Spec, want.Spec) {
			return nil
		}

		_, err = nodes.Update(ctx, want, metav1.UpdateOptions{})

		return err
	})
	if err != nil {
		return fmt.Errorf("updating the existing Node %s: %w", k.opts.NodeName, err)
	}

	return nil
}

// reconcileMeta sets what the kubelet (and Talos, for labels and taints) owns on the Node.
func (k *Kubelet) reconcileMeta(node *corev1.Node) {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}

	maps.Copy(node.Labels, map[string]string{
		corev1.LabelHostname:      k.opts.NodeName,
		corev1.LabelOSStable:      "linux",
		corev1.LabelArchStable:    "amd64",
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": "amd64",
	})
	maps.Copy(node.Labels, k.opts.Labels)

	if k.opts.ControlPlane {
		node.Labels[controlPlaneRole] = ""
	}

	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}

	node.Annotations[attachDetachAnnotation] = "true"
	node.Spec.Taints = k.reconcileTaints(node.Spec.Taints)
}

// reconcileTaints adds the missing taints of Options.Taints and the control-plane taint (when the
// node is a control plane that does not allow scheduling), and removes the control-plane taint
// otherwise; other taints (the node lifecycle controller's, an operator's) are kept.
func (k *Kubelet) reconcileTaints(taints []corev1.Taint) []corev1.Taint {
	cp := corev1.Taint{Key: controlPlaneRole, Effect: corev1.TaintEffectNoSchedule}
	wantCP := k.opts.ControlPlane && !k.opts.AllowSchedulingOnControlPlanes

	out := slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool {
		return !wantCP && t.MatchTaint(&cp)
	})

	want := slices.Clone(k.opts.Taints)
	if wantCP {
		want = append([]corev1.Taint{cp}, want...)
	}

	for _, t := range want {
		if !slices.ContainsFunc(out, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
			out = append(out, t)
		}
	}

	if len(out) == 0 {
		return nil
	}

	return out
}
