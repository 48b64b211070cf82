package day2

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/go-kubernetes/kubernetes/ssa"
	"github.com/siderolabs/go-kubernetes/kubernetes/ssa/object"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// SyncOptions describe one manifest sync.
type SyncOptions struct {
	Access  Access
	Objects []Object
	// Prune are the keys of objects an earlier sync applied that the configuration dropped.
	Prune []string
	// PruneCRDsAndNamespaces deletes CustomResourceDefinitions and Namespaces among Prune too;
	// otherwise they are left in place and untracked.
	PruneCRDsAndNamespaces bool
	// Force recreates objects whose immutable fields changed (Jobs always are).
	Force bool
	// NoWait are manifests whose objects are applied but not waited for: objects that become
	// ready only through something outside the cluster (Flux's GitRepository, once the git host
	// accepts its deploy key).
	NoWait   []string
	Timeout  time.Duration
	Progress Progress
}

// SyncResult is what a sync did.
type SyncResult struct {
	Created, Configured, Unchanged, Pruned []string // keys
	// Left are CRDs and Namespaces not pruned (no opt-in) and objects that are not ours.
	Left []string
}

// Sync applies objects the way `talosctl upgrade-k8s` syncs Talos' bootstrap manifests from
// v1.13 (go-kubernetes' ssa manager: server-side apply with field manager "talos", inventory
// ConfigMap kube-system/talos-bootstrap-manifests-inventory, objects Talos created without an
// inventory adopted), so the two never fight over fields or ownership. Before anything changes,
// every object goes through a server-side dry run: one invalid object fails the sync untouched.
// Then the changed objects are applied, objects in Prune are deleted (only those the inventory
// owns) and the sync waits until what changed is ready.
func Sync(ctx context.Context, o SyncOptions) (SyncResult, error) {
	var res SyncResult

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	rc, err := o.Access.RESTConfig()
	if err != nil {
		return res, err
	}

	rc.QPS, rc.Burst = 50, 100

	mgr, err := ssa.NewManager(ctx, rc, constants.KubernetesFieldManagerName,
		constants.KubernetesInventoryNamespace, constants.KubernetesBootstrapManifestsInventoryName)
	if err != nil {
		return res, fmt.Errorf("connecting to the cluster: %w", err)
	}
	defer mgr.Close()

	disco, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return res, err
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))

	if err := waitForKinds(ctx, mapper, o.Objects, o.Progress); err != nil {
		return res, err
	}

	objs := make([]*unstructured.Unstructured, 0, len(o.Objects))
	byMeta := map[object.ObjMetadata]string{}

	for _, ob := range o.Objects {
		u := ob.Obj.DeepCopy()
		scopeNamespace(mapper, u)
		objs = append(objs, u)
		byMeta[object.ObjMetadata{Namespace: u.GetNamespace(), Name: u.GetName(), GroupKind: u.GroupVersionKind().GroupKind()}] = ob.Key
	}

	o.Progress.say("manifests: server-side dry run of %d objects", len(objs))

	// A Job's pod template is immutable and charts change it with their values (Cilium's
	// hubble-generate-certs): Jobs are recreated when it changes, as `talosctl upgrade-k8s
	// --manifests-force` would; other objects only with Force.
	var jobs, rest []*unstructured.Unstructured

	for _, u := range objs {
		if gvk := u.GroupVersionKind(); gvk.Group == "batch" && gvk.Kind == "Job" && !o.Force {
			jobs = append(jobs, u)
		} else {
			rest = append(rest, u)
		}
	}

	// The objects go in two parts, each diffed and applied with its own force.
	parts := []struct {
		objs  []*unstructured.Unstructured
		force bool
	}{{rest, o.Force}, {jobs, true}}

	var changed, awaited object.ObjMetadataSet

	created := map[object.ObjMetadata]bool{}
	noWait := map[object.ObjMetadata]bool{}

	for _, ob := range o.Objects {
		if slices.Contains(o.NoWait, ob.Manifest) {
			noWait[scopedMeta(mapper, ob.Obj)] = true
		}
	}

	for _, part := range parts {
		if len(part.objs) == 0 {
			continue
		}

		diff, err := mgr.Diff(ctx, cloneAll(part.objs), ssa.DiffOptions{NoPrune: true, InventoryPolicy: ssa.InventoryPolicyAdoptIfNoInventory, Force: part.force})
		if err != nil {
			return res, fmt.Errorf("the dry run refused the manifests, nothing was changed: %w%s", err, forceHint(err, o.Force))
		}

		for _, d := range diff {
			key := byMeta[d.ObjMetadata]
			if key == "" {
				key = metaKey(d.ObjMetadata)
			}

			switch d.Action {
			case ssa.DiffCreatedAction:
				res.Created = append(res.Created, key)
				created[d.ObjMetadata] = true
			case ssa.DiffConfiguredAction:
				res.Configured = append(res.Configured, key)
			default:
				res.Unchanged = append(res.Unchanged, key)

				continue
			}

			changed = append(changed, d.ObjMetadata)
			if !noWait[d.ObjMetadata] {
				awaited = append(awaited, d.ObjMetadata)
			}
		}
	}

	if err := checkRecreations(ctx, rc, mapper, objs, created, o.Progress); err != nil {
		return res, err
	}

	if len(changed) > 0 {
		o.Progress.say("manifests: applying (%d to create, %d to change, %d unchanged)", len(res.Created), len(res.Configured), len(res.Unchanged))

		for _, part := range parts {
			if len(part.objs) == 0 {
				continue
			}

			if _, err := mgr.Apply(ctx, part.objs, ssa.ApplyOptions{
				NoPrune: true, InventoryPolicy: ssa.InventoryPolicyAdoptIfNoInventory, WaitTimeout: o.Timeout, Force: part.force,
			}); err != nil {
				return res, fmt.Errorf("applying the manifests: %w", err)
			}
		}
	}

	if len(o.Prune) > 0 {
		if err := prune(ctx, o, rc, mapper, &res); err != nil {
			return res, err
		}
	}

	if len(awaited) > 0 {
		o.Progress.say("manifests: waiting for %d changed objects to be ready", len(awaited))

		if err := mgr.Wait(ctx, awaited, ssa.WaitOptions{Interval: 2 * time.Second, Timeout: time.Until(deadline(ctx)), FailFast: true}); err != nil {
			return res, fmt.Errorf("the manifests were applied, but not everything became ready: %w", err)
		}
	}

	return res, nil
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()

	return d
}

func cloneAll(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, u := range objs {
		out[i] = u.DeepCopy()
	}

	return out
}

// scopeNamespace puts a namespaced object without a namespace in "default", and takes the
// namespace off a cluster-scoped object that has one (charts write `namespace:` on ClusterRoles):
// the API server stores it without, so with it the object would differ at every sync and its
// readiness be looked up where it is not. kubectl and Helm do the same. A kind the API server does
// not serve yet (a CRD of the same sync) is left alone.
func scopeNamespace(mapper meta.RESTMapper, u *unstructured.Unstructured) {
	m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		return
	}

	switch {
	case m.Scope.Name() == meta.RESTScopeNameNamespace && u.GetNamespace() == "":
		u.SetNamespace(metav1.NamespaceDefault)
	case m.Scope.Name() == meta.RESTScopeNameRoot && u.GetNamespace() != "":
		u.SetNamespace("")
	}
}

// scopedMeta is the metadata of obj as the API server keeps it (scopeNamespace).
func scopedMeta(mapper meta.RESTMapper, obj *unstructured.Unstructured) object.ObjMetadata {
	u := obj.DeepCopy()
	scopeNamespace(mapper, u)

	return object.ObjMetadata{Namespace: u.GetNamespace(), Name: u.GetName(), GroupKind: u.GroupVersionKind().GroupKind()}
}

func metaKey(m object.ObjMetadata) string {
	return strings.Join([]string{m.GroupKind.Group, m.GroupKind.Kind, m.Namespace, m.Name}, "/")
}

// prune deletes what the configuration dropped, never an object the Talos inventory does not
// own, and CRDs and Namespaces only with the opt-in; each one leaves the inventory.
func prune(ctx context.Context, o SyncOptions, rc *rest.Config, mapper meta.RESTMapper, res *SyncResult) error {
	clientset, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}

	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}

	inv, err := ssa.GetInventory(ctx, clientset, constants.KubernetesInventoryNamespace, constants.KubernetesBootstrapManifestsInventoryName)
	if err != nil {
		return fmt.Errorf("reading the manifests inventory: %w", err)
	}

	refs := inv.Get()

	wanted := map[object.ObjMetadata]bool{}

	for _, ob := range o.Objects {
		wanted[scopedMeta(mapper, ob.Obj)] = true
	}

	var errs []error

	for _, key := range o.Prune {
		gk, ns, name, err := ParseKey(key)
		if err != nil {
			return err
		}

		mapping, err := mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			res.Pruned = append(res.Pruned, key) // its kind is gone, and so is the object

			continue
		} else if err != nil {
			return fmt.Errorf("pruning %s: %w", Display(key), err)
		}

		r := dyn.Resource(mapping.Resource)

		var ri dynamic.ResourceInterface = r
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if ns == "" {
				ns = metav1.NamespaceDefault
			}

			ri = r.Namespace(ns)
		} else {
			ns = ""
		}

		ref := object.ObjMetadata{GroupKind: gk, Namespace: ns, Name: name}

		// The configuration still has this object, written another way (a cluster-scoped object
		// that lost or gained a namespace, `default` written out): it is kept.
		if wanted[ref] {
			continue
		}

		live, err := ri.Get(ctx, name, metav1.GetOptions{})

		switch {
		case apierrors.IsNotFound(err):
			res.Pruned = append(res.Pruned, key)
			refs = refs.Remove(ref)

			continue
		case err != nil:
			return fmt.Errorf("pruning %s: %w", Display(key), err)
		}

		if owner := live.GetAnnotations()[ssa.InventoryAnnotationKey]; owner != constants.KubernetesBootstrapManifestsInventoryName {
			o.Progress.say("manifests: left %s in place: it is not owned by the Talos manifests inventory (%s=%q)",
				Display(key), ssa.InventoryAnnotationKey, owner)
			res.Left = append(res.Left, key)

			continue
		}

		if isCRDOrNamespace(gk.Group, gk.Kind) && !o.PruneCRDsAndNamespaces {
			o.Progress.say("manifests: left %s in place and stopped tracking it (deleting it would delete everything "+
				"of that type or in it; set manifestSync.pruneCrdsAndNamespaces to delete it)", Display(key))
			res.Left = append(res.Left, key)
			refs = refs.Remove(ref)

			continue
		}

		o.Progress.say("manifests: pruning %s", Display(key))

		policy := metav1.DeletePropagationBackground
		if err := ri.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("pruning %s: %w", Display(key), err))

			continue
		}

		res.Pruned = append(res.Pruned, key)
		refs = refs.Remove(ref)
	}

	inv.Update(refs)

	if err := inv.Write(ctx); err != nil {
		errs = append(errs, fmt.Errorf("updating the manifests inventory: %w", err))
	}

	return errors.Join(errs...)
}

func isCRDOrNamespace(group, kind string) bool {
	return (group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition") || (group == "" && kind == "Namespace")
}

// waitForKinds waits until the API server serves the kind of every object whose CRD is not among
// the objects: a custom resource of a CRD that an operator registers when it starts (Cilium's
// CiliumLoadBalancerIPPool, for one) can be applied only then. Talos' own bootstrap keeps
// retrying such objects; the sync waits for them within its timeout.
func waitForKinds(ctx context.Context, mapper *restmapper.DeferredDiscoveryRESTMapper, objs []Object, progress Progress) error {
	own := map[string]bool{} // group/kind of the CRDs among the objects
	for _, o := range objs {
		if gvk := o.Obj.GroupVersionKind(); gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition" {
			group, _, _ := unstructured.NestedString(o.Obj.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Obj.Object, "spec", "names", "kind")
			own[group+"/"+kind] = true
		}
	}

	return poll(ctx, time.Until(deadline(ctx)), "the API server to serve the manifests' kinds", progress, func(context.Context) error {
		var missing []string

		for _, o := range objs {
			gvk := o.Obj.GroupVersionKind()
			if own[gvk.Group+"/"+gvk.Kind] {
				continue
			}

			if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				if !meta.IsNoMatchError(err) {
					return err
				}

				if m := gvk.Kind + "." + gvk.Group + "/" + gvk.Version; !slices.Contains(missing, m) {
					missing = append(missing, m)
				}
			}
		}

		if len(missing) > 0 {
			mapper.Reset()

			return fmt.Errorf("not served yet (their CRDs are not in the manifests; an operator may register them): %s",
				strings.Join(missing, ", "))
		}

		return nil
	})
}

// forceHint says what to do about an immutable field change.
func forceHint(err error, force bool) string {
	if force || !strings.Contains(err.Error(), "immutable") && !strings.Contains(err.Error(), "Invalid value") {
		return ""
	}

	return " (if a field that cannot change did, set manifestSync.force to delete and recreate such objects)"
}
