package kubeletemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// syncMirrorPods publishes the static pods as mirror pods named <name>-<node> in kube-system,
// owned by the Node, replacing one whose image changed (a static pod manifest that changed).
func (k *Kubelet) syncMirrorPods(ctx context.Context) error {
	if len(k.opts.StaticPods) == 0 {
		return nil
	}

	node, err := k.opts.Client.CoreV1().Nodes().Get(ctx, k.opts.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}

	pods := k.opts.Client.CoreV1().Pods(metav1.NamespaceSystem)

	for _, sp := range k.opts.StaticPods {
		name := sp.Name + "-" + k.opts.NodeName

		existing, err := pods.Get(ctx, name, metav1.GetOptions{})

		switch {
		case err == nil && len(existing.Spec.Containers) == 1 && existing.Spec.Containers[0].Image == sp.Image:
			if existing.Status.Phase != corev1.PodRunning {
				if err := k.markRunning(ctx, existing); err != nil {
					return err
				}
			}

			continue
		case err == nil:
			if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		case !apierrors.IsNotFound(err):
			return err
		}

		created, err := pods.Create(ctx, k.mirrorPod(node, sp, name), metav1.CreateOptions{})
		if err != nil {
			return err
		}

		if err := k.markRunning(ctx, created); err != nil {
			return err
		}
	}

	return nil
}

func (k *Kubelet) mirrorPod(node *corev1.Node, sp StaticPod, name string) *corev1.Pod {
	sum := sha256.Sum256([]byte(sp.Name + sp.Image))
	hash := hex.EncodeToString(sum[:16])

	labels := map[string]string{}
	maps.Copy(labels, sp.Labels)

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: metav1.NamespaceSystem, Labels: labels,
			Annotations: map[string]string{
				"kubernetes.io/config.mirror": hash, "kubernetes.io/config.hash": hash,
				"kubernetes.io/config.source": "file", "kubernetes.io/config.seen": metav1.Now().UTC().Format("2006-01-02T15:04:05.000000000Z"),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName: k.opts.NodeName, HostNetwork: true, PriorityClassName: "system-node-critical",
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			Containers:  []corev1.Container{{Name: sp.Name, Image: sp.Image, Command: []string{"/usr/local/bin/" + sp.Name}}},
		},
	}
}
