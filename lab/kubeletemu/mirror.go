package kubeletemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The annotations of a static pod's mirror pod.
const (
	mirrorAnnotation = "kubernetes.io/config.mirror"
	hashAnnotation   = "kubernetes.io/config.hash"
	sourceAnnotation = "kubernetes.io/config.source"
	seenAnnotation   = "kubernetes.io/config.seen"
)

// isMirrorPod reports whether pod is a mirror pod (of this node, for a pod bound to it).
func isMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[mirrorAnnotation]

	return ok
}

// syncMirrorPods publishes the static pods as mirror pods named <name>-<node> in kube-system,
// owned by the Node and running: a missing one is created, one whose manifest changed (image,
// labels, annotations) or that belongs to an earlier Node object is replaced, and mirror pods of
// static pods the node no longer has are deleted. The informer's pods are the reference, so that
// nothing is asked of the API server while all is well.
func (k *Kubelet) syncMirrorPods(ctx context.Context) error {
	node, err := k.currentNode(ctx, false)
	if err != nil {
		return fmt.Errorf("reading Node %s: %w", k.opts.NodeName, err)
	}

	pods := k.opts.Client.CoreV1().Pods(metav1.NamespaceSystem)
	want := map[string]bool{}

	var errs []error

	for _, sp := range k.opts.StaticPods {
		name := sp.Name + "-" + k.opts.NodeName
		hash := configHash(sp)
		want[metav1.NamespaceSystem+"/"+name] = true

		if existing := k.storedPod(metav1.NamespaceSystem + "/" + name); existing != nil {
			if existing.DeletionTimestamp == nil && existing.Annotations[hashAnnotation] == hash && ownedByNode(existing, node) {
				continue
			}

			final := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &existing.UID}}
			if err := ignoreGone(pods.Delete(ctx, name, final)); err != nil {
				errs = append(errs, fmt.Errorf("replacing mirror pod %s: %w", name, err))

				continue
			}
		}

		created, err := pods.Create(ctx, k.mirrorPod(sp, name, hash, node), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue // the informer has not seen it yet; the next sync looks again
		}

		if err != nil {
			errs = append(errs, fmt.Errorf("creating mirror pod %s: %w", name, err))

			continue
		}

		if _, err := k.markRunning(ctx, created); err != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("mirror pod %s status: %w", name, err))
		}
	}

	for _, obj := range k.pods.GetStore().List() {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !k.ours(pod) || !isMirrorPod(pod) || pod.DeletionTimestamp != nil || want[pod.Namespace+"/"+pod.Name] {
			continue
		}

		final := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}}
		if err := ignoreGone(k.opts.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, final)); err != nil {
			errs = append(errs, fmt.Errorf("deleting orphaned mirror pod %s: %w", pod.Name, err))
		}
	}

	return errors.Join(errs...)
}

// storedPod is the informer's pod with that key, if any.
func (k *Kubelet) storedPod(key string) *corev1.Pod {
	obj, ok, _ := k.pods.GetStore().GetByKey(key)
	if !ok {
		return nil
	}

	pod, _ := obj.(*corev1.Pod)

	return pod
}

// ownedByNode reports whether the mirror pod belongs to this Node object (not to one deleted and
// registered again).
func ownedByNode(pod *corev1.Pod, node *corev1.Node) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "Node" && ref.Name == node.Name && ref.UID == node.UID {
			return true
		}
	}

	return false
}

// mirrorPod is the API server's copy of a static pod, as the kubelet creates it.
func (k *Kubelet) mirrorPod(sp StaticPod, name, hash string, node *corev1.Node) *corev1.Pod {
	annotations := map[string]string{}
	maps.Copy(annotations, sp.Annotations)
	maps.Copy(annotations, map[string]string{
		mirrorAnnotation: hash, hashAnnotation: hash, sourceAnnotation: "file",
		seenAnnotation: metav1.Now().UTC().Format("2006-01-02T15:04:05.000000000Z"),
	})

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: metav1.NamespaceSystem, Labels: maps.Clone(sp.Labels), Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName: k.opts.NodeName, HostNetwork: true, PriorityClassName: "system-node-critical",
			RestartPolicy: corev1.RestartPolicyAlways,
			Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			Containers: []corev1.Container{{
				Name: sp.Name, Image: sp.Image, Command: []string{"/usr/local/bin/" + sp.Name},
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
		},
	}
}

// configHash is the static pod's manifest hash (32 hex digits, as the kubelet's).
func configHash(sp StaticPod) string {
	b, _ := json.Marshal(sp) // maps marshal in key order: the hash is stable

	sum := sha256.Sum256(b)

	return hex.EncodeToString(sum[:16])
}
