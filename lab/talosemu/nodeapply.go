package talosemu

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Talos' annotations on the Node of what it set (machinery's constants.AnnotationOwnedLabels and
// AnnotationOwnedTaints).
const (
	ownedLabelsAnnotation = "talos.dev/owned-labels"
	ownedTaintsAnnotation = "talos.dev/owned-taints"
)

// nodeSpecs are the labels and taints Talos' NodeLabelSpec and NodeTaintSpec controllers derive
// from a node's configuration, through machinery's accessors: machine.nodeLabels and
// machine.nodeTaints, or the KubeNodeConfig document's (machinery adds the control-plane role
// label, and the control-plane NoSchedule taint unless cluster.allowSchedulingOnControlPlanes, on
// control planes).
func nodeSpecs(cfg config.Config) (map[string]string, []corev1.Taint) {
	n := cfg.K8sNodeConfig()
	if n == nil {
		return nil, nil
	}

	var taints []corev1.Taint

	for _, key := range slices.Sorted(maps.Keys(n.Taints())) {
		value, effect, found := strings.Cut(n.Taints()[key], ":")
		if !found {
			value, effect = "", value
		}

		taints = append(taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}

	return maps.Clone(n.Labels()), taints
}

// nodeSpecsKey identifies what nodeSpecs gave, to sync a Node only when it changes.
func nodeSpecsKey(labels map[string]string, taints []corev1.Taint) string {
	return fmt.Sprintf("%v %v", labels, taints)
}

// syncNodeSpecs is Talos' k8s.NodeApplyController (internal/app/machined/pkg/controllers/k8s/
// node_apply.go): it sets the node's labels and taints on its Node object and remembers in the
// owned annotations which it set, so it removes those no longer declared and leaves alone what
// someone else set with another value. A Node not registered yet is an error: the next
// reconcile tries again. The product's day2.SyncWorkerNode does the same for workers; this copy is
// the emulated Talos' own, written from Talos' source, so the lab does not check the product
// against the product's code.
func syncNodeSpecs(ctx context.Context, client kubernetes.Interface, name string, labels map[string]string, taints []corev1.Taint) error {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}

	if node.Labels == nil {
		node.Labels = map[string]string{}
	}

	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}

	ownedLabels, err := ownedKeys(node, ownedLabelsAnnotation)
	if err != nil {
		return err
	}

	ownedTaints, err := ownedKeys(node, ownedTaintsAnnotation)
	if err != nil {
		return err
	}

	applyLabels(node, ownedLabels, labels)
	applyTaints(node, ownedTaints, taints)

	if err := setOwnedKeys(node, ownedLabelsAnnotation, ownedLabels); err != nil {
		return err
	}

	if err := setOwnedKeys(node, ownedTaintsAnnotation, ownedTaints); err != nil {
		return err
	}

	_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})

	return err
}

// applyLabels takes over the declared labels the Node lacks or has with the same value, updates
// the owned ones, and removes the owned ones no longer declared.
func applyLabels(node *corev1.Node, owned map[string]bool, labels map[string]string) {
	for key, value := range labels {
		current, exists := node.Labels[key]

		switch {
		case !exists, current == value:
			node.Labels[key] = value
			owned[key] = true
		case owned[key]:
			node.Labels[key] = value
		}
	}

	for key := range owned {
		if _, declared := labels[key]; !declared {
			delete(node.Labels, key)
			delete(owned, key)
		}
	}
}

// applyTaints does the same for taints, by key.
func applyTaints(node *corev1.Node, owned map[string]bool, taints []corev1.Taint) {
	for _, t := range taints {
		i := slices.IndexFunc(node.Spec.Taints, func(n corev1.Taint) bool { return n.Key == t.Key })

		switch {
		case i < 0:
			node.Spec.Taints = append(node.Spec.Taints, t)
			owned[t.Key] = true
		case owned[t.Key]:
			node.Spec.Taints[i].Value, node.Spec.Taints[i].Effect = t.Value, t.Effect
		case node.Spec.Taints[i].Value == t.Value && node.Spec.Taints[i].Effect == t.Effect:
			owned[t.Key] = true
		}
	}

	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(n corev1.Taint) bool {
		if !owned[n.Key] || slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == n.Key }) {
			return false
		}

		delete(owned, n.Key)

		return true
	})
}

func ownedKeys(node *corev1.Node, annotation string) (map[string]bool, error) {
	owned := map[string]bool{}

	if raw := node.Annotations[annotation]; raw != "" {
		var keys []string
		if err := json.Unmarshal([]byte(raw), &keys); err != nil {
			return nil, fmt.Errorf("the Node's %s annotation: %w", annotation, err)
		}

		for _, k := range keys {
			owned[k] = true
		}
	}

	return owned, nil
}

func setOwnedKeys(node *corev1.Node, annotation string, owned map[string]bool) error {
	if len(owned) == 0 {
		delete(node.Annotations, annotation)

		return nil
	}

	raw, err := json.Marshal(slices.Sorted(maps.Keys(owned)))
	if err != nil {
		return err
	}

	node.Annotations[annotation] = string(raw)

	return nil
}
