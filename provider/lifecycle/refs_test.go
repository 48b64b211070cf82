package lifecycle

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// kindInfo is what the tests read of a Kind.
type kindInfo interface {
	token() string
	types() (in, out, args reflect.Type)
}

func (k Kind[I, O, P]) token() string { return k.Token }

func (k Kind[I, O, P]) types() (in, out, args reflect.Type) {
	return reflect.TypeFor[I](), reflect.TypeFor[O](), k.args
}

// kinds are the resources the plugin serves with their Kinds: provider.go serves these
// resources (infer.Resource of each), and TestKindsCoverSchema checks the list against
// schema.json.
var kinds = []struct {
	res   infer.InferredResource
	kind  kindInfo
	state reflect.Type
}{
	{infer.Resource(&NodeUpgrade{}), NodeUpgradeKind, reflect.TypeFor[NodeUpgradeState]()},
	{infer.Resource(&ClusterHealth{}), ClusterHealthKind, reflect.TypeFor[ClusterHealthState]()},
	{infer.Resource(&Membership{}), MembershipKind, reflect.TypeFor[MembershipState]()},
	{infer.Resource(&ManifestSync{}), ManifestSyncKind, reflect.TypeFor[ManifestSyncState]()},
	{infer.Resource(&NodeRetire{}), NodeRetireKind, reflect.TypeFor[NodeRetireState]()},
	{infer.Resource(&KubernetesUpgrade{}), KubernetesUpgradeKind, reflect.TypeFor[KubernetesUpgradeState]()},
	{infer.Resource(&NodeConfig{}), NodeConfigKind, reflect.TypeFor[NodeConfigState]()},
	{infer.Resource(&NodeAddress{}), NodeAddressKind, reflect.TypeFor[NodeAddressState]()},
	{infer.Resource(&ClientCredentials{}), ClientCredentialsKind, reflect.TypeFor[ClientCredentialsState]()},
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

// Every resource of the lifecycle module in the served schema has a Kind, and each Kind's token
// is the one infer derives for its resource under the package's name.
func TestKindsCoverSchema(t *testing.T) {
	t.Parallel()

	name, resources := checkedInSchema(t)

	var served, listed []string

	for tk := range resources {
		if strings.HasPrefix(tk, tokenPrefix) {
			served = append(served, tk)
		}
	}

	for _, k := range kinds {
		listed = append(listed, k.kind.token())

		tk, err := k.res.GetToken()
		if err != nil {
			t.Fatal(err)
		}

		// infer names the package "pkg" until the provider is built under its name.
		mod, ok := strings.CutPrefix(string(tk), "pkg:")
		if want := name + ":" + mod; !ok || k.kind.token() != want {
			t.Errorf("token %q, infer serves %q (from %q)", k.kind.token(), want, tk)
		}
	}

	slices.Sort(served)
	slices.Sort(listed)

	if !slices.Equal(served, listed) {
		t.Errorf("schema.json serves %v, the Kinds are %v", served, listed)
	}
}

// The seam: for every resource, its Args and its inputs struct have one field per input property
// the plugin serves (flattened, by tag), the inputs field carrying the Args field's type; the
// outputs view has one field per output property, carrying the State field's type; and Register
// requires what the plugin requires. (After a change of the Args, `make schema` updates
// schema.json.)
func TestKindsMatchServedProperties(t *testing.T) {
	t.Parallel()

	_, resources := checkedInSchema(t)

	for _, k := range kinds {
		in, out, args := k.kind.types()

		t.Run(args.Name(), func(t *testing.T) {
			t.Parallel()

			spec, ok := resources[k.kind.token()]
			if !ok {
				t.Fatalf("schema.json has no resource %s", k.kind.token())
			}

			inFields, argFields, outFields, stateFields := fieldsByTag(in), fieldsByTag(args), fieldsByTag(out), fieldsByTag(k.state)

			if got, want := slices.Sorted(maps.Keys(inFields)), slices.Sorted(maps.Keys(spec.InputProperties)); !slices.Equal(got, want) {
				t.Errorf("%s has fields %v, the resource takes %v", in, got, want)
			}

			if got, want := slices.Sorted(maps.Keys(argFields)), slices.Sorted(maps.Keys(spec.InputProperties)); !slices.Equal(got, want) {
				t.Errorf("%s has fields %v, schema.json serves %v (run `make schema` after changing the Args)", args, got, want)
			}

			for _, prop := range spec.RequiredInputs {
				if _, ok := inFields[prop]; !ok {
					t.Errorf("%s has no field for the required input %s", in, prop)
				}
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

			for prop, f := range inFields {
				if a, ok := argFields[prop]; ok {
					if err := sameInput(a.Type, f.Type); err != nil {
						t.Errorf("%s.%s: %v", in, f.Name, err)
					}
				}
			}

			if got, want := slices.Sorted(maps.Keys(outFields)), slices.Sorted(maps.Keys(spec.Properties)); !slices.Equal(got, want) {
				t.Errorf("%s has fields %v, the resource outputs %v", out, got, want)
			}

			for prop, f := range outFields {
				if s, ok := stateFields[prop]; ok {
					if err := sameOutput(s.Type, f.Type); err != nil {
						t.Errorf("%s.%s: %v", out, f.Name, err)
					}
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

// sameInput checks that an inputs field (a Pulumi input, or a map or struct of them) carries
// the Args field's Go type.
func sameInput(arg, in reflect.Type) error {
	if in.Kind() == reflect.Interface && in.Implements(reflect.TypeFor[pulumi.Input]()) {
		for i := range in.NumMethod() {
			m := in.Method(i)
			if strings.HasPrefix(m.Name, "To") && strings.HasSuffix(m.Name, "Output") && m.Type.NumIn() == 0 && m.Type.NumOut() == 1 {
				if o, ok := reflect.Zero(m.Type.Out(0)).Interface().(pulumi.Output); ok {
					if o.ElementType() != arg {
						return fmt.Errorf("carries %s, the resource takes %s", o.ElementType(), arg)
					}

					return nil
				}
			}
		}

		return fmt.Errorf("%s has no To…Output method", in)
	}

	switch {
	case in.Kind() == reflect.Map && arg.Kind() == reflect.Map:
		return sameInput(arg.Elem(), in.Elem())
	case in.Kind() == reflect.Struct && arg.Kind() == reflect.Struct:
		inFields, argFields := fieldsByTag(in), fieldsByTag(arg)
		if got, want := slices.Sorted(maps.Keys(inFields)), slices.Sorted(maps.Keys(argFields)); !slices.Equal(got, want) {
			return fmt.Errorf("%s has fields %v, %s has %v", in, got, arg, want)
		}

		var errs []error
		for prop, f := range inFields {
			if err := sameInput(argFields[prop].Type, f.Type); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", prop, err))
			}
		}

		return errors.Join(errs...)
	default:
		return fmt.Errorf("%s cannot carry %s", in, arg)
	}
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

// inputMap flattens embedded structs, leaves nil inputs out and turns structs and maps of them
// into maps.
func TestInputMap(t *testing.T) {
	t.Parallel()

	m, err := inputMap(reflect.ValueOf(MembershipInputs{
		ClusterAccessInputs: ClusterAccessInputs{Talosconfig: pulumi.String("tc")},
		Nodes: map[string]MemberNodeInputs{
			"cp-1": {Address: pulumi.String("10.0.0.11"), ControlPlane: pulumi.Bool(true)},
			"w-1":  {Address: pulumi.String("10.0.0.21")},
		},
		Timeout: pulumi.String("10m"),
	}))
	if err != nil {
		t.Fatal(err)
	}

	want := pulumi.Map{
		"talosconfig": pulumi.String("tc"),
		"nodes": pulumi.Map{
			"cp-1": pulumi.Map{"address": pulumi.String("10.0.0.11"), "controlPlane": pulumi.Bool(true)},
			"w-1":  pulumi.Map{"address": pulumi.String("10.0.0.21")},
		},
		"timeout": pulumi.String("10m"),
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("inputMap = %#v, want %#v", m, want)
	}

	type untagged struct {
		Timeout pulumi.StringInput
	}

	if _, err := inputMap(reflect.ValueOf(untagged{})); err == nil || !strings.Contains(err.Error(), "no pulumi tag") {
		t.Errorf("an untagged field: err = %v", err)
	}
}

// mocks is a Pulumi engine that records the inputs of each registration and answers with them,
// plus extra outputs.
type mocks struct {
	mu     sync.Mutex
	inputs map[string]resource.PropertyMap
	extra  resource.PropertyMap
}

func (m *mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()

	m.inputs[args.TypeToken+"/"+args.Name] = args.Inputs

	out := args.Inputs.Copy()
	maps.Copy(out, m.extra)

	return args.Name + "-id", out, nil
}

func (m *mocks) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// Register sends the flattened inputs under the resource's token, fills the outputs view, and
// refuses inputs without a required one before registering anything.
func TestKindRegister(t *testing.T) {
	t.Parallel()

	engine := &mocks{
		inputs: map[string]resource.PropertyMap{},
		extra:  resource.PropertyMap{"runningVersion": resource.NewStringProperty("v1.11.5")},
	}

	var running string

	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		in := NodeUpgradeInputs{
			ClusterAccessInputs: ClusterAccessInputs{Talosconfig: pulumi.String("tc"), Kubeconfig: pulumi.String("kc")},
			NodeRefInputs:       NodeRefInputs{Node: pulumi.String("cp-1"), Address: pulumi.String("10.0.0.11"), ControlPlane: pulumi.Bool(true)},
			ControlPlanes:       pulumi.StringMap{"cp-1": pulumi.String("10.0.0.11")},
			TalosVersion:        pulumi.String("v1.11.5"), SchematicId: pulumi.String("aaa"), InstallerImage: pulumi.String("f/installer/aaa:v1.11.5"),
			Drain: pulumi.Bool(true), DrainTimeout: pulumi.String("5m"), Timeout: pulumi.String("10m"),
			CheckReady: pulumi.Bool(true), AllowDowngrade: pulumi.Bool(false),
		}

		u, err := NodeUpgradeKind.Register(ctx, "cp-1-upgrade", in)
		if err != nil {
			return err
		}

		u.RunningVersion.ApplyT(func(v string) string { running = v; return v })

		in.TalosVersion = nil
		if _, err := NodeUpgradeKind.Register(ctx, "incomplete", in); err == nil ||
			!strings.Contains(err.Error(), "the input talosVersion is required") || !strings.Contains(err.Error(), NodeUpgradeToken) {
			return fmt.Errorf("registering without talosVersion: err = %v", err)
		}

		_, err = NodeAddressKind.Register(ctx, "w-1-address", NodeAddressInputs{
			Node: pulumi.String("w-1"), Subnet: pulumi.String("10.0.0.0/24"), Timeout: pulumi.String("10m"),
		})

		return err
	}, pulumi.WithMocks("project", "stack", engine))
	if err != nil {
		t.Fatal(err)
	}

	if running != "v1.11.5" {
		t.Errorf("RunningVersion = %q", running)
	}

	got := engine.inputs[NodeUpgradeToken+"/cp-1-upgrade"]
	if keys := slices.Sorted(maps.Keys(got.Mappable())); len(keys) != 14 || got["talosconfig"].StringValue() != "tc" ||
		got["node"].StringValue() != "cp-1" || !got["controlPlane"].BoolValue() || got["controlPlanes"].ObjectValue()["cp-1"].StringValue() != "10.0.0.11" {
		t.Errorf("NodeUpgrade inputs = %v", got)
	}

	if _, ok := engine.inputs[NodeUpgradeToken+"/incomplete"]; ok {
		t.Error("inputs without a required one were registered")
	}

	if got := slices.Sorted(maps.Keys(engine.inputs[NodeAddressToken+"/w-1-address"].Mappable())); !slices.Equal(got, []string{"node", "subnet", "timeout"}) {
		t.Errorf("NodeAddress inputs = %v, want the three given (the optional ones left out)", got)
	}
}

// The plugin decodes the embedded heads from the inputs and encodes them into the outputs,
// secrets kept: a NodeRetire's create records its inputs.
func TestEmbeddedHeadsRoundTrip(t *testing.T) {
	t.Parallel()

	prov, err := infer.NewProviderBuilder().WithResources(infer.Resource(&NodeRetire{})).Build()
	if err != nil {
		t.Fatal(err)
	}

	server, err := integration.NewServer(t.Context(), "talos-proxmox", semver.MustParse("0.1.0"), integration.WithProvider(prov))
	if err != nil {
		t.Fatal(err)
	}

	in := property.NewMap(map[string]property.Value{
		"talosconfig":  property.New("tc").WithSecret(true),
		"kubeconfig":   property.New("kc").WithSecret(true),
		"node":         property.New("cp-1"),
		"address":      property.New("10.0.0.11"),
		"controlPlane": property.New(true),
		"drainTimeout": property.New("5m"),
		"timeout":      property.New("10m"),
	})

	resp, err := server.Create(p.CreateRequest{
		Urn:        resource.URN("urn:pulumi:dev::lab::" + NodeRetireToken + "::cp-1-retire"),
		Properties: in,
	})
	if err != nil {
		t.Fatal(err)
	}

	if resp.ID != "cp-1" {
		t.Errorf("ID = %q, want the node's name", resp.ID)
	}

	if !property.New(resp.Properties).Equals(property.New(in)) {
		t.Errorf("outputs = %v, want the inputs %v", resp.Properties, in)
	}
}
