package lifecycle

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// kindInfo is what the tests read of a Kind.
type kindInfo interface {
	token() string
	types() (args, out reflect.Type)
}

func (k Kind[A, O, P]) token() string { return k.Token }

func (k Kind[A, O, P]) types() (args, out reflect.Type) {
	return reflect.TypeFor[A](), reflect.TypeFor[O]()
}

// kinds are the Kinds of the resources the plugin serves (served), one each.
var kinds = []kindInfo{
	NodeUpgradeKind, ClusterHealthKind, MembershipKind, ManifestSyncKind, NodeRetireKind, KubernetesUpgradeKind,
	KubernetesRecordKind, NodeConfigKind, NodeAddressKind, ClientCredentialsKind, EtcdSnapshotKind, EtcdBootstrapKind,
	AdoptedSecretsKind, DeployKeyKind,
}

// servedByToken are the served resources by the type token infer gives each, under the package's
// name.
func servedByToken(t *testing.T, pkg string) map[string]servedResource {
	t.Helper()

	out := map[string]servedResource{}

	for _, r := range served {
		tk, err := r.inferred.GetToken()
		if err != nil {
			t.Fatal(err)
		}

		// infer names the package "pkg" until the provider is built under its name.
		mod, ok := strings.CutPrefix(string(tk), "pkg:")
		if !ok {
			t.Fatalf("infer names a resource %q", tk)
		}

		out[pkg+":"+mod] = r
	}

	return out
}

// resourceSpec is what the tests read of a resource in the schema.
type resourceSpec struct {
	InputProperties map[string]json.RawMessage `json:"inputProperties"`
	RequiredInputs  []string                   `json:"requiredInputs"`
	Properties      map[string]json.RawMessage `json:"properties"`
}

// checkedInSchema is schema.json at the repository root, which package provider's
// TestSchemaIsCurrent keeps equal to the schema the plugin serves.
func checkedInSchema(t *testing.T) (name string, resources map[string]resourceSpec) {
	t.Helper()

	raw, err := os.ReadFile("../../schema.json")
	if err != nil {
		t.Fatal(err)
	}

	var s struct {
		Name      string                  `json:"name"`
		Resources map[string]resourceSpec `json:"resources"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}

	return s.Name, s.Resources
}

// Every resource of the lifecycle module in the served schema is served and has a Kind, and each
// Kind's token is the one infer derives for its resource under the package's name.
func TestKindsCoverSchema(t *testing.T) {
	t.Parallel()

	name, resources := checkedInSchema(t)

	var inSchema, listed []string

	for tk := range resources {
		if strings.HasPrefix(tk, tokenPrefix) {
			inSchema = append(inSchema, tk)
		}
	}

	for _, k := range kinds {
		listed = append(listed, k.token())
	}

	slices.Sort(inSchema)
	slices.Sort(listed)

	if servedTokens := slices.Sorted(maps.Keys(servedByToken(t, name))); !slices.Equal(servedTokens, listed) {
		t.Errorf("the plugin serves %v, the Kinds are %v", servedTokens, listed)
	}

	if !slices.Equal(inSchema, listed) {
		t.Errorf("schema.json serves %v, the Kinds are %v", inSchema, listed)
	}
}

// The seam: for every resource, its Args (which the component sets its inputs on, so they carry
// the Args fields' types) have one field per input property the plugin serves (flattened, by
// tag); the outputs view's fields are outputs the resource serves (the ones the component reads),
// each carrying the State field's type; and Register requires what the plugin requires. (After a
// change of the Args, `make schema` updates schema.json.)
func TestKindsMatchServedProperties(t *testing.T) {
	t.Parallel()

	name, resources := checkedInSchema(t)
	byToken := servedByToken(t, name)

	for _, k := range kinds {
		args, out := k.types()
		state := byToken[k.token()].state

		t.Run(args.Name(), func(t *testing.T) {
			t.Parallel()

			spec, ok := resources[k.token()]
			if !ok || state == nil {
				t.Fatalf("schema.json or the plugin has no resource %s", k.token())
			}

			argFields, outFields, stateFields := fieldsByTag(args), fieldsByTag(out), fieldsByTag(state)

			if got, want := slices.Sorted(maps.Keys(argFields)), slices.Sorted(maps.Keys(spec.InputProperties)); !slices.Equal(got, want) {
				t.Errorf("%s has fields %v, schema.json serves %v (run `make schema` after changing the Args)", args, got, want)
			}

			var required []string

			for _, f := range reflect.VisibleFields(args) {
				if prop, optional, ok := tagOf(f); ok && !optional {
					required = append(required, prop)
				}
			}

			if !slices.Equal(required, spec.RequiredInputs) {
				t.Errorf("Register requires %v, the resource %v", required, spec.RequiredInputs)
			}

			for prop, f := range outFields {
				if _, ok := spec.Properties[prop]; !ok {
					t.Errorf("%s.%s: the resource has no output %s (it outputs %v)", out, f.Name, prop, slices.Sorted(maps.Keys(spec.Properties)))
					continue
				}

				s, ok := stateFields[prop]
				if !ok {
					t.Errorf("%s.%s: %s has no field %s", out, f.Name, state, prop)
					continue
				}

				if err := sameOutput(s.Type, f.Type); err != nil {
					t.Errorf("%s.%s: %v", out, f.Name, err)
				}
			}
		})
	}
}

// fieldsByTag are a struct's fields with a `pulumi` tag, embedded structs' included, by the
// tag's name.
func fieldsByTag(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}

	for _, f := range reflect.VisibleFields(t) {
		if name, _, ok := tagOf(f); ok {
			out[name] = f
		}
	}

	return out
}

// sameOutput checks that an outputs field is the Pulumi output of the State field's Go type (an
// object as map[string]any).
func sameOutput(state, out reflect.Type) error {
	o, ok := reflect.Zero(out).Interface().(pulumi.Output)
	if !ok {
		return fmt.Errorf("%s is not a Pulumi output", out)
	}

	var plain func(t reflect.Type) reflect.Type
	plain = func(t reflect.Type) reflect.Type {
		switch t.Kind() {
		case reflect.Struct:
			return reflect.TypeFor[map[string]any]()
		case reflect.Map:
			return reflect.MapOf(t.Key(), plain(t.Elem()))
		case reflect.Slice:
			return reflect.SliceOf(plain(t.Elem()))
		default:
			return t
		}
	}

	if o.ElementType() != plain(state) {
		return fmt.Errorf("carries %s, the resource outputs %s", o.ElementType(), state)
	}

	return nil
}
