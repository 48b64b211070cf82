package lifecycle

import (
	"fmt"
	"maps"
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
		extra:  resource.PropertyMap{"address": resource.NewStringProperty("10.0.0.21")},
	}

	var found string

	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		in := NodeUpgradeInputs{
			ClusterAccessInputs: ClusterAccessInputs{Talosconfig: pulumi.String("tc"), Kubeconfig: pulumi.String("kc")},
			NodeRefInputs:       NodeRefInputs{Node: pulumi.String("cp-1"), Address: pulumi.String("10.0.0.11"), ControlPlane: pulumi.Bool(true)},
			ControlPlanes:       pulumi.StringMap{"cp-1": pulumi.String("10.0.0.11")},
			TalosVersion:        pulumi.String("v1.11.5"), SchematicId: pulumi.String("aaa"), InstallerImage: pulumi.String("f/installer/aaa:v1.11.5"),
			Drain: pulumi.Bool(true), DrainTimeout: pulumi.String("5m"), Timeout: pulumi.String("10m"),
			CheckReady: pulumi.Bool(true), AllowDowngrade: pulumi.Bool(false),
		}

		if _, err := NodeUpgradeKind.Register(ctx, "cp-1-upgrade", in); err != nil {
			return err
		}

		in.TalosVersion = nil
		if _, err := NodeUpgradeKind.Register(ctx, "incomplete", in); err == nil ||
			!strings.Contains(err.Error(), "the input talosVersion is required") || !strings.Contains(err.Error(), NodeUpgradeToken) {
			return fmt.Errorf("registering without talosVersion: err = %v", err)
		}

		a, err := NodeAddressKind.Register(ctx, "w-1-address", NodeAddressInputs{
			Node: pulumi.String("w-1"), Subnet: pulumi.String("10.0.0.0/24"), Timeout: pulumi.String("10m"),
		})
		if err != nil {
			return err
		}

		a.Address.ApplyT(func(v string) string { found = v; return v })

		return nil
	}, pulumi.WithMocks("project", "stack", engine))
	if err != nil {
		t.Fatal(err)
	}

	if found != "10.0.0.21" {
		t.Errorf("Address = %q", found)
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
