package day2

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Manifest is one named manifest of the cluster: a rendered Helm release, an inline manifest or
// the contents of an extra manifest URL.
type Manifest struct {
	Name     string
	Contents string
	// Namespace, when set, is where the manifest's namespaced objects that name none go (as
	// with `kubectl apply -n`); see namespaced.
	Namespace string
}

// Object is one Kubernetes object of a manifest.
type Object struct {
	Manifest string
	Key      string // group/Kind/namespace/name, as written (see ParseKey)
	Hash     string // sha256 of the object's canonical JSON
	Obj      *unstructured.Unstructured
}

// Applied is what a sync applied: manifest name → object key → hash. It is all a later sync needs
// to know what changed and what to prune.
type Applied map[string]map[string]string

// ParseManifests splits each manifest into its objects (YAML documents, `List`s expanded), in
// order. An object without apiVersion, kind or name, or a key that occurs twice, is an error
// naming the manifest.
func ParseManifests(manifests []Manifest) ([]Object, error) {
	var (
		out  []Object
		errs []error
	)

	seen := map[string]string{}

	decoded := make([][]*unstructured.Unstructured, len(manifests))

	for i, m := range manifests {
		objs, err := decode(m.Contents)
		if err != nil {
			errs = append(errs, fmt.Errorf("manifest %s: %w", m.Name, err))

			continue
		}

		decoded[i] = objs
	}

	namespaced(manifests, decoded)

	for i, m := range manifests {
		objs := decoded[i]

		for _, o := range objs {
			key, err := objectKey(o)
			if err != nil {
				errs = append(errs, fmt.Errorf("manifest %s: %w", m.Name, err))

				continue
			}

			if prev, ok := seen[key]; ok {
				errs = append(errs, fmt.Errorf("manifest %s: %s is also in manifest %s; keep one", m.Name, Display(key), prev))

				continue
			}

			seen[key] = m.Name

			canon, err := json.Marshal(o.Object) // encoding/json sorts map keys
			if err != nil {
				return nil, err
			}

			sum := sha256.Sum256(canon)
			out = append(out, Object{Manifest: m.Name, Key: key, Hash: hex.EncodeToString(sum[:]), Obj: o})
		}
	}

	return out, errors.Join(errs...)
}

func decode(contents string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(contents), 4096)

	var out []*unstructured.Unstructured

	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}

			return nil, err
		}

		if len(doc) == 0 {
			continue
		}

		u := &unstructured.Unstructured{Object: doc}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, err
			}

			for i := range list.Items {
				out = append(out, &list.Items[i])
			}

			continue
		}

		out = append(out, u)
	}
}

func objectKey(o *unstructured.Unstructured) (string, error) {
	gvk := o.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		// Its fields are named, never its values: a manifest may be a Secret.
		return "", fmt.Errorf("an object has no apiVersion or kind (its fields: %s)", strings.Join(slices.Sorted(maps.Keys(o.Object)), ", "))
	}

	if o.GetName() == "" {
		return "", fmt.Errorf("a %s has no metadata.name (generateName cannot be synced)", gvk.Kind)
	}

	return strings.Join([]string{gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName()}, "/"), nil
}

// ParseKey splits a key into its group and kind, namespace and name.
func ParseKey(key string) (schema.GroupKind, string, string, error) {
	p := strings.Split(key, "/")
	if len(p) != 4 || p[1] == "" || p[3] == "" {
		return schema.GroupKind{}, "", "", fmt.Errorf("%q is not a group/Kind/namespace/name key", key)
	}

	return schema.GroupKind{Group: p[0], Kind: p[1]}, p[2], p[3], nil
}

// Display is the key as kubectl shows it: Kind[.group] [namespace/]name.
func Display(key string) string {
	gk, ns, name, err := ParseKey(key)
	if err != nil {
		return key
	}

	s := gk.Kind
	if gk.Group != "" {
		s += "." + gk.Group
	}

	if ns != "" {
		name = ns + "/" + name
	}

	return s + " " + name
}

// AppliedOf is what applying objs records.
func AppliedOf(objs []Object) Applied {
	a := Applied{}

	for _, o := range objs {
		if a[o.Manifest] == nil {
			a[o.Manifest] = map[string]string{}
		}

		a[o.Manifest][o.Key] = o.Hash
	}

	return a
}

// SyncPlan is what a sync changes, per manifest, judged from what the last sync applied (the
// cluster may differ: the sync's server-side dry run tells, at `up`).
type SyncPlan struct {
	Added, Changed, Pruned map[string][]string // manifest → keys
}

// Empty reports whether the plan changes nothing.
func (p SyncPlan) Empty() bool { return len(p.Added)+len(p.Changed)+len(p.Pruned) == 0 }

// PruneKeys are the keys the plan deletes.
func (p SyncPlan) PruneKeys() []string {
	var keys []string
	for _, ks := range p.Pruned {
		keys = append(keys, ks...)
	}

	slices.Sort(keys)

	return keys
}

// PlanSync compares what the last sync applied with objs. An object that moved to another
// manifest is changed there, not pruned.
func PlanSync(last Applied, objs []Object) SyncPlan {
	p := SyncPlan{Added: map[string][]string{}, Changed: map[string][]string{}, Pruned: map[string][]string{}}

	before := map[string]string{} // key → hash
	from := map[string]string{}   // key → manifest

	for m, objects := range last {
		for k, h := range objects {
			before[k], from[k] = h, m
		}
	}

	now := map[string]bool{}

	for _, o := range objs {
		now[o.Key] = true

		switch h, ok := before[o.Key]; {
		case !ok:
			p.Added[o.Manifest] = append(p.Added[o.Manifest], o.Key)
		case h != o.Hash || from[o.Key] != o.Manifest:
			p.Changed[o.Manifest] = append(p.Changed[o.Manifest], o.Key)
		}
	}

	for _, k := range slices.Sorted(maps.Keys(before)) {
		if !now[k] {
			p.Pruned[from[k]] = append(p.Pruned[from[k]], k)
		}
	}

	return p
}

// summaryNames is how many objects a summary line names before it counts the rest.
const summaryNames = 6

// Summary says per manifest what the plan adds, changes and prunes, one line each.
func (p SyncPlan) Summary() []string {
	names := map[string]bool{}
	for _, m := range []map[string][]string{p.Added, p.Changed, p.Pruned} {
		for n := range m {
			names[n] = true
		}
	}

	var lines []string

	for _, n := range slices.Sorted(maps.Keys(names)) {
		var parts []string

		for _, c := range []struct {
			what string
			keys []string
		}{{"added", p.Added[n]}, {"changed", p.Changed[n]}, {"pruned", p.Pruned[n]}} {
			if len(c.keys) == 0 {
				continue
			}

			shown := make([]string, 0, min(len(c.keys), summaryNames)+1)
			for _, k := range c.keys[:min(len(c.keys), summaryNames)] {
				shown = append(shown, Display(k))
			}

			if more := len(c.keys) - summaryNames; more > 0 {
				shown = append(shown, fmt.Sprintf("and %d more", more))
			}

			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(c.keys), c.what, strings.Join(shown, ", ")))
		}

		lines = append(lines, n+": "+strings.Join(parts, "; "))
	}

	return lines
}
