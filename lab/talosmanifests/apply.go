package talosmanifests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/constants"
	corev1 "k8s.io/api/core/v1"
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

// InventoryAnnotation marks the objects Talos created (fluxcd ssa's inventory annotation key).
const InventoryAnnotation = "config.k8s.io/owning-inventory"

// Apply creates the objects of sources that do not exist yet, Talos' way: Namespaces and CRDs
// first, each object once (recorded in the inventory ConfigMap kube-system/
// talos-bootstrap-manifests-inventory), never updating an existing one. Objects that cannot be
// created yet (e.g. a custom resource whose CRD is not established) or are invalid are reported
// in the error while the others are created; the caller retries, as Talos' controller does.
//
// With inventory false it behaves as Talos before v1.13 (internal/app/machined/pkg/controllers/
// k8s/manifest_apply.go of v1.11): a plain create with field manager "talos", no inventory
// annotation and no inventory ConfigMap.
func Apply(ctx context.Context, cfg *rest.Config, sources []Source, inventory bool) (created []string, err error) {
	clients, err := newClients(cfg)
	if err != nil {
		return nil, err
	}

	inv, err := clients.loadInventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("error getting inventory: %w", err)
	}

	var errs []error

	for _, obj := range ordered(sources) {
		name, made, err := clients.create(ctx, obj, inv, inventory)

		switch {
		case err != nil:
			errs = append(errs, err)
		case made:
			created = append(created, name)
		}
	}

	if !inventory {
		return created, errors.Join(errs...)
	}

	if err := clients.writeInventory(ctx, inv); err != nil {
		errs = append(errs, fmt.Errorf("updating inventory failed: %w", err))
	}

	return created, errors.Join(errs...)
}

type clients struct {
	dyn    dynamic.Interface
	core   kubernetes.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newClients(cfg *rest.Config) (*clients, error) {
	// Talos applies from the node, not through a rate-limited client: client-go's default budget
	// (5 requests/s) would spread a CNI's manifests over seconds.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400

	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}

	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}

	return &clients{dyn: dyn, core: core, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))}, nil
}

// ordered flattens the sources, Namespaces and CRDs first (stable otherwise).
func ordered(sources []Source) []*unstructured.Unstructured {
	var all []*unstructured.Unstructured
	for _, s := range sources {
		all = append(all, s.Documents...)
	}

	rank := func(u *unstructured.Unstructured) int {
		gvk := u.GroupVersionKind()
		switch {
		case gvk.Kind == "Namespace" && gvk.Group == "":
			return 0
		case gvk.Kind == "CustomResourceDefinition" && gvk.Group == "apiextensions.k8s.io":
			return 1
		default:
			return 2
		}
	}

	slices.SortStableFunc(all, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })

	return all
}

// create creates obj unless the inventory holds it or it exists.
func (c *clients) create(ctx context.Context, obj *unstructured.Unstructured, inv map[string]string, inventory bool) (string, bool, error) {
	obj = obj.DeepCopy()
	gvk := obj.GroupVersionKind()
	name := fmt.Sprintf("%s/%s", strings.ToLower(gvk.Kind), obj.GetName())

	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		c.mapper.Reset()

		return name, false, fmt.Errorf("error creating mapping for object %s: %w", name, err)
	}

	var dr dynamic.ResourceInterface

	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(corev1.NamespaceDefault)
		}

		dr = c.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		name = obj.GetNamespace() + "/" + name
	} else {
		obj.SetNamespace("")
		dr = c.dyn.Resource(mapping.Resource)
	}

	key := inventoryKey(obj)
	if _, ok := inv[key]; ok {
		return name, false, nil
	}

	if _, err := dr.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
		inv[key] = "" // exists: adopt it into the inventory, never update it

		return name, false, nil
	} else if !apierrors.IsNotFound(err) {
		return name, false, fmt.Errorf("error checking resource existence: %w", err)
	}

	if !inventory {
		if _, err := dr.Create(ctx, obj, metav1.CreateOptions{FieldManager: constants.KubernetesFieldManagerName}); err != nil {
			return name, false, fmt.Errorf("error creating %s: %w", name, err)
		}

		return name, true, nil
	}

	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}

	ann[InventoryAnnotation] = constants.KubernetesBootstrapManifestsInventoryName
	obj.SetAnnotations(ann)

	if _, err := dr.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: constants.KubernetesFieldManagerName}); err != nil {
		return name, false, fmt.Errorf("error creating %s: %w", name, err)
	}

	inv[key] = ""

	return name, true, nil
}

// inventoryKey is cli-utils' ObjMetadata string: namespace_name_group_kind.
func inventoryKey(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()

	return obj.GetNamespace() + "_" + obj.GetName() + "_" + gvk.Group + "_" + gvk.Kind
}

func (c *clients) loadInventory(ctx context.Context) (map[string]string, error) {
	cm, err := c.core.CoreV1().ConfigMaps(constants.KubernetesInventoryNamespace).Get(ctx, constants.KubernetesBootstrapManifestsInventoryName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return map[string]string{}, nil
	}

	if err != nil {
		return nil, err
	}

	inv := map[string]string{}
	for k, v := range cm.Data {
		inv[k] = v
	}

	return inv, nil
}

func (c *clients) writeInventory(ctx context.Context, inv map[string]string) error {
	cms := c.core.CoreV1().ConfigMaps(constants.KubernetesInventoryNamespace)

	cm, err := cms.Get(ctx, constants.KubernetesBootstrapManifestsInventoryName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: constants.KubernetesBootstrapManifestsInventoryName, Namespace: constants.KubernetesInventoryNamespace},
			Data:       inv,
		}, metav1.CreateOptions{})

		return err
	}

	if err != nil {
		return err
	}

	cm.Data = inv
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})

	return err
}
