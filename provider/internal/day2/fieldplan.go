package day2

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/constants"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/redact"
)

// serverFields are what the API server keeps on every object by itself: never a change the
// manifests make.
var serverFields = []string{
	".metadata.managedFields", ".metadata.resourceVersion", ".metadata.generation", ".metadata.uid",
	".metadata.creationTimestamp", ".status",
}

// maxFields is how many field paths one object's line names before it counts the rest.
const maxFields = 8

// FieldChanges asks the API server what applying each object of keys would change: a
// server-side apply dry run as the sync's (field manager "talos", forced), compared with the
// object as it is. It returns per key the changed field paths, e.g. ".data.mode: fast → slow"
// (values of Secrets, and long ones, as fingerprints or not at all). An object the server does not
// have, or cannot dry-run, gets a line that says so.
func FieldChanges(ctx context.Context, a Access, objs []Object, keys []string) (map[string][]string, error) {
	rc, err := a.RESTConfig()
	if err != nil {
		return nil, err
	}

	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}

	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	out := map[string][]string{}

	for _, o := range objs {
		if !slices.Contains(keys, o.Key) {
			continue
		}

		paths, err := fieldChanges(ctx, dyn, mapper, o.Obj)
		if err != nil {
			out[o.Key] = []string{"(" + err.Error() + ")"}
			continue
		}

		out[o.Key] = paths
	}

	return out, nil
}

func fieldChanges(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured) ([]string, error) {
	u := obj.DeepCopy()
	scopeNamespace(mapper, u)

	gvk := u.GroupVersionKind()

	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("the server does not serve %s yet", gvk.Kind)
	}

	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(mapping.Resource).Namespace(u.GetNamespace())
	}

	live, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading it: %w", err)
	}

	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}

	force := true

	applied, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: constants.KubernetesFieldManagerName, Force: &force,
	})
	if err != nil {
		return nil, fmt.Errorf("the dry run refuses it: %w", err)
	}

	secret := gvk.Group == "" && gvk.Kind == "Secret"

	var paths []string

	diffFields(live.Object, applied.Object, "", secret, &paths)

	if len(paths) > maxFields {
		paths = append(paths[:maxFields], fmt.Sprintf("and %d more", len(paths)-maxFields))
	}

	return paths, nil
}

// diffFields appends the paths under which a and b differ: maps key by key, anything else as a
// whole, with the old and new value when short (fingerprints for a Secret's data).
func diffFields(a, b any, at string, secret bool, into *[]string) {
	if slices.ContainsFunc(serverFields, func(f string) bool { return at == f }) {
		return
	}

	am, aMap := a.(map[string]any)
	bm, bMap := b.(map[string]any)

	if aMap && bMap {
		all := slices.Sorted(maps.Keys(am))
		for k := range bm {
			if _, ok := am[k]; !ok {
				all = append(all, k)
			}
		}

		slices.Sort(all)

		for _, k := range all {
			diffFields(am[k], bm[k], at+"."+k, secret, into)
		}

		return
	}

	if reflect.DeepEqual(a, b) {
		return
	}

	*into = append(*into, at+": "+shown(a, at, secret)+" → "+shown(b, at, secret))
}

// shown is a field value as a summary line shows it: absent, short scalars as they are, Secret
// data as fingerprints, anything else as "…".
func shown(v any, at string, secret bool) string {
	if v == nil {
		return "(none)"
	}

	if secret && (strings.HasPrefix(at, ".data.") || strings.HasPrefix(at, ".stringData.")) {
		if s, ok := v.(string); ok {
			return redact.Fingerprint(s)
		}
	}

	switch x := v.(type) {
	case string:
		if len(x) <= 40 && !strings.ContainsAny(x, "\n") {
			return fmt.Sprintf("%q", x)
		}
	case bool, int64, float64:
		return fmt.Sprint(x)
	}

	return "…"
}
