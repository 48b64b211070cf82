package talosemu

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// runOperators stands in for operators that register CRDs when they start (KubeOptions.
// OperatorCRDs): once a pod an entry selects runs, its CRDs are created.
func (c *Cluster) runOperators(ctx context.Context) {
	c.mu.Lock()
	k := c.kube
	c.mu.Unlock()

	if k == nil || k.cp == nil || c.opts.Kube == nil || len(c.opts.Kube.OperatorCRDs) == 0 {
		return
	}

	for _, selector := range slices.Sorted(maps.Keys(c.opts.Kube.OperatorCRDs)) {
		c.mu.Lock()
		done := k.operators[selector]
		c.mu.Unlock()

		if done {
			continue
		}

		pods, err := k.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }) {
			continue
		}

		if err := c.createCRDs(ctx, k, c.opts.Kube.OperatorCRDs[selector]); err != nil {
			c.noteKubeError(fmt.Errorf("operator %s: %w", selector, err))

			continue
		}

		c.opts.Logf("talosemu: the operator (%s) runs; its CRDs are registered", selector)

		c.mu.Lock()
		if k.operators == nil {
			k.operators = map[string]bool{}
		}

		k.operators[selector] = true
		c.mu.Unlock()
	}
}

func (c *Cluster) createCRDs(ctx context.Context, k *kube, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
	if err != nil {
		return err
	}

	dyn, err := dynamic.NewForConfig(k.cp.RESTConfig())
	if err != nil {
		return err
	}

	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}

		var obj map[string]any
		if err := yaml.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}

		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}

		if _, err := dyn.Resource(crdResource).Create(ctx, u, metav1.CreateOptions{FieldManager: "operator"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", u.GetName(), err)
		}
	}

	return nil
}
