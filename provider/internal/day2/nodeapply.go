package day2

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
)

// SyncWorkerNode sets a worker's labels and taints, as its configuration declares them, on its
// Node with the admin credentials, the way Talos' node apply controller would: it records what it
// set in the talos.dev/owned-labels and owned-taints annotations, removes what it set before and
// no longer declares, and leaves alone what someone else set with another value.
//
// Talos' controller writes a worker's Node with the kubelet's own credentials, which the
// NodeRestriction admission plugin (always on in Talos) forbids to change taints: a worker's
// taints would otherwise only be what it registered with. After this, Talos finds nothing left to
// change and takes ownership as usual. A Node not registered yet is left to its registration
// (the kubelet registers with the configuration's taints). The labels Talos sets for the node's
// system extensions (extensions.talos.dev/…) are Talos' own: never touched. A conflicting write or
// an API server that does not answer for a moment is tried again until timeout.
func SyncWorkerNode(ctx context.Context, kube kubernetes.Interface, name, config string, timeout time.Duration, progress Progress) error {
	cfg, err := configloader.NewFromBytes([]byte(config))
	if err != nil {
		return fmt.Errorf("reading the configuration of node %s: %w", name, err)
	}

	nc := cfg.K8sNodeConfig()
	if nc == nil {
		return nil
	}

	labels, taints := nc.Labels(), parseTaints(nc.Taints())

	err = poll(ctx, timeout, "setting the labels and taints of node "+name+" on its Node", progress, func(ctx context.Context) error {
		node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}

		if err != nil {
			return err
		}

		before := node.DeepCopy()

		if err := applyNodeSpecs(node, labels, taints); err != nil {
			return retry.Permanent(err)
		}

		if maps.Equal(before.Labels, node.Labels) && maps.Equal(before.Annotations, node.Annotations) &&
			slices.Equal(before.Spec.Taints, node.Spec.Taints) {
			return nil
		}

		_, err = kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})

		return err
	})

	if err != nil {
		return fmt.Errorf("setting the labels and taints of node %s on its Node: %w", name, err)
	}

	return nil
}

// parseTaints reads Talos' taints (key → "value:Effect" or "Effect") in key order.
func parseTaints(in map[string]string) []corev1.Taint {
	var out []corev1.Taint

	for _, key := range slices.Sorted(maps.Keys(in)) {
		value, effect, found := strings.Cut(in[key], ":")
		if !found {
			value, effect = "", value
		}

		out = append(out, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}

	return out
}

// applyNodeSpecs is the inner loop of Talos' node apply controller on node: the labels and
// taints declared, with the owned annotations.
func applyNodeSpecs(node *corev1.Node, labels map[string]string, taints []corev1.Taint) error {
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}

	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}

	ownedLabels, err := owned(node, constants.AnnotationOwnedLabels)
	if err != nil {
		return err
	}

	ownedTaints, err := owned(node, constants.AnnotationOwnedTaints)
	if err != nil {
		return err
	}

	for key, value := range labels {
		if strings.HasPrefix(key, constants.K8sExtensionPrefix) {
			continue
		}

		current, exists := node.Labels[key]

		switch {
		case !exists, current == value:
			node.Labels[key] = value
			ownedLabels[key] = true
		case ownedLabels[key]:
			node.Labels[key] = value
		}
	}

	for key := range ownedLabels {
		if _, declared := labels[key]; !declared && !strings.HasPrefix(key, constants.K8sExtensionPrefix) {
			delete(node.Labels, key)
			delete(ownedLabels, key)
		}
	}

	for _, t := range taints {
		i := slices.IndexFunc(node.Spec.Taints, func(n corev1.Taint) bool { return n.Key == t.Key })

		switch {
		case i < 0:
			node.Spec.Taints = append(node.Spec.Taints, t)
			ownedTaints[t.Key] = true
		case ownedTaints[t.Key]:
			node.Spec.Taints[i].Value, node.Spec.Taints[i].Effect = t.Value, t.Effect
		case node.Spec.Taints[i].Value == t.Value && node.Spec.Taints[i].Effect == t.Effect:
			ownedTaints[t.Key] = true
		}
	}

	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(n corev1.Taint) bool {
		if !ownedTaints[n.Key] || slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == n.Key }) {
			return false
		}

		delete(ownedTaints, n.Key)

		return true
	})

	setOwned(node, constants.AnnotationOwnedLabels, ownedLabels)
	setOwned(node, constants.AnnotationOwnedTaints, ownedTaints)

	return nil
}

func owned(node *corev1.Node, annotation string) (map[string]bool, error) {
	out := map[string]bool{}

	if raw := node.Annotations[annotation]; raw != "" {
		var keys []string
		if err := json.Unmarshal([]byte(raw), &keys); err != nil {
			return nil, fmt.Errorf("the Node's %s annotation: %w", annotation, err)
		}

		for _, k := range keys {
			out[k] = true
		}
	}

	return out, nil
}

func setOwned(node *corev1.Node, annotation string, keys map[string]bool) {
	if len(keys) == 0 {
		delete(node.Annotations, annotation)
		return
	}

	raw, _ := json.Marshal(slices.Sorted(maps.Keys(keys))) //nolint:errchkjson // a list of strings

	node.Annotations[annotation] = string(raw)
}
