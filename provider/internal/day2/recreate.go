package day2

import (
	"context"
	"errors"
	"fmt"

	"github.com/siderolabs/go-kubernetes/kubernetes/ssa/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// checkRecreations creates, in a server-side dry run, the new version of every object the sync
// is about to recreate: the ssa manager applies a change to an immutable field (a Job's pod
// template always, other objects with Force) by deleting the object and creating it again, and
// its own dry run cannot tell whether the new version is valid — an API server answers an invalid
// value like an immutable field. A new version it refuses would leave the object deleted; checked
// here, the sync fails with nothing changed. The copy gets a generated name, so the check never
// meets the object itself.
func checkRecreations(ctx context.Context, rc *rest.Config, mapper meta.RESTMapper, objs []*unstructured.Unstructured,
	created map[object.ObjMetadata]bool, progress Progress,
) error {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}

	var errs []error

	for _, u := range objs {
		key := object.ObjMetadata{Namespace: u.GetNamespace(), Name: u.GetName(), GroupKind: u.GroupVersionKind().GroupKind()}
		if !created[key] {
			continue
		}

		gvk := u.GroupVersionKind()

		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue // a kind the server does not serve yet: a new object, created, not recreated
		}

		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(mapping.Resource).Namespace(u.GetNamespace())
		}

		if _, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			continue // a new object: the ssa dry run validated it
		} else if err != nil {
			return fmt.Errorf("reading %s: %w", describe(u), err)
		}

		progress.say("manifests: %s is recreated to apply its change; checking its new version first", describe(u))

		candidate := u.DeepCopy()
		candidate.SetGenerateName(generatePrefix(u.GetName()))
		candidate.SetName("")
		candidate.SetResourceVersion("")
		candidate.SetUID("")

		if _, err := ri.Create(ctx, candidate, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			errs = append(errs, fmt.Errorf("%s: its change needs it deleted and created again, and the API server refuses "+
				"the new version: %w", describe(u), err))
		}
	}

	if len(errs) > 0 {
		return fmt.Errorf("the dry run refused the manifests, nothing was changed: %w", errors.Join(errs...))
	}

	return nil
}

// generatePrefix is a generateName for a check's copy of the object named name: short enough
// for a label-sized name once the server appends its 5 characters.
func generatePrefix(name string) string {
	if len(name) > 50 {
		name = name[:50]
	}

	return name + "-"
}

func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", u.GetKind(), ns, u.GetName())
	}

	return fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
}
