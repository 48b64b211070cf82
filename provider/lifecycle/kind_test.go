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
	"github.com/pulumi/pulumi/sdk/v3/go/pulumix"
)

// Inputs flatten embedded heads, leave out nil inputs, turn objects into maps, and refuse
// inputs that leave a required one out (objects' included) or are set on another Args' field.
func TestInputsPropertyMap(t *testing.T) {
	t.Parallel()

	// members are cp-1 and w-1; w-1 says it is no control plane unless left incomplete.
	members := func(incomplete bool) map[string]*Inputs[MemberNode] {
		out := map[string]*Inputs[MemberNode]{}
		for name, addr := range map[string]string{"cp-1": "10.0.0.11", "w-1": "10.0.0.21"} {
			in, n := NewInputs[MemberNode]()
			Set(in, &n.Address, pulumi.String(addr))

			if name == "cp-1" || !incomplete {
				Set(in, &n.ControlPlane, pulumi.Bool(name == "cp-1"))
			}

			out[name] = in
		}

		return out
	}

	in, a := MembershipKind.Inputs()
	Set(in, &a.Talosconfig, pulumi.String("tc"))
	Set(in, &a.Kubeconfig, pulumi.String("kc"))
	SetEach(in, &a.Nodes, members(false))
	Set(in, &a.DrainTimeout, pulumi.String("5m"))
	Set(in, &a.Timeout, pulumi.String("10m"))

	m, err := in.propertyMap()
	if err != nil {
		t.Fatal(err)
	}

	want := pulumi.Map{
		"talosconfig": pulumi.String("tc"),
		"kubeconfig":  pulumi.String("kc"),
		"nodes": pulumi.Map{
			"cp-1": pulumi.Map{"address": pulumi.String("10.0.0.11"), "controlPlane": pulumi.Bool(true)},
			"w-1":  pulumi.Map{"address": pulumi.String("10.0.0.21"), "controlPlane": pulumi.Bool(false)},
		},
		"drainTimeout": pulumi.String("5m"),
		"timeout":      pulumi.String("10m"),
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("propertyMap = %#v, want %#v", m, want)
	}

	partial, b := MembershipKind.Inputs()
	Set(partial, &b.Talosconfig, pulumi.String("tc"))
	Set(partial, &b.Kubeconfig, nil)
	SetEach(partial, &b.Nodes, members(true))
	Set(partial, &b.DrainTimeout, pulumi.String("5m"))
	Set(partial, &b.Timeout, pulumi.String("10m"))
	Set(partial, &a.Timeout, pulumi.String("1m")) // a field of the other inputs

	if _, ok := partial.set[&b.Kubeconfig]; ok {
		t.Error("a nil input was set")
	}

	_, err = partial.propertyMap()
	for _, want := range []string{"the input kubeconfig is required", "nodes: w-1: the input controlPlane is required", "1 inputs are set on fields that are not properties"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("partial inputs: err = %v, want %q", err, want)
		}
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
		upgrade := func(talosVersion pulumix.Input[string]) *Inputs[NodeUpgradeArgs] {
			in, a := NodeUpgradeKind.Inputs()
			Set(in, &a.Talosconfig, pulumi.String("tc"))
			Set(in, &a.Kubeconfig, pulumi.String("kc"))
			Set(in, &a.Node, pulumi.String("cp-1"))
			Set(in, &a.Address, pulumi.String("10.0.0.11"))
			Set(in, &a.ControlPlane, pulumi.Bool(true))
			Set(in, &a.ControlPlanes, pulumi.StringMap{"cp-1": pulumi.String("10.0.0.11")})
			Set(in, &a.TalosVersion, talosVersion)
			Set(in, &a.SchematicId, pulumi.String("aaa"))
			Set(in, &a.InstallerImage, pulumi.String("f/installer/aaa:v1.11.5"))
			Set(in, &a.Drain, pulumi.Bool(true))
			Set(in, &a.DrainTimeout, pulumi.String("5m"))
			Set(in, &a.Timeout, pulumi.String("10m"))
			Set(in, &a.CheckReady, pulumi.Bool(true))
			Set(in, &a.AllowDowngrade, pulumi.Bool(false))

			return in
		}

		if _, err := NodeUpgradeKind.Register(ctx, "cp-1-upgrade", upgrade(pulumi.String("v1.11.5"))); err != nil {
			return err
		}

		if _, err := NodeUpgradeKind.Register(ctx, "incomplete", upgrade(nil)); err == nil ||
			!strings.Contains(err.Error(), "the input talosVersion is required") || !strings.Contains(err.Error(), NodeUpgradeKind.Token) {
			return fmt.Errorf("registering without talosVersion: err = %v", err)
		}

		in, args := NodeAddressKind.Inputs()
		Set(in, &args.Node, pulumi.String("w-1"))
		Set(in, &args.Subnet, pulumi.String("10.0.0.0/24"))
		Set(in, &args.Timeout, pulumi.String("10m"))

		a, err := NodeAddressKind.Register(ctx, "w-1-address", in)
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

	got := engine.inputs[NodeUpgradeKind.Token+"/cp-1-upgrade"]
	if keys := slices.Sorted(maps.Keys(got.Mappable())); len(keys) != 14 || got["talosconfig"].StringValue() != "tc" ||
		got["node"].StringValue() != "cp-1" || !got["controlPlane"].BoolValue() || got["controlPlanes"].ObjectValue()["cp-1"].StringValue() != "10.0.0.11" {
		t.Errorf("NodeUpgrade inputs = %v", got)
	}

	if _, ok := engine.inputs[NodeUpgradeKind.Token+"/incomplete"]; ok {
		t.Error("inputs without a required one were registered")
	}

	if got := slices.Sorted(maps.Keys(engine.inputs[NodeAddressKind.Token+"/w-1-address"].Mappable())); !slices.Equal(got, []string{"node", "subnet", "timeout"}) {
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
		Urn:        resource.URN("urn:pulumi:dev::lab::" + NodeRetireKind.Token + "::cp-1-retire"),
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
