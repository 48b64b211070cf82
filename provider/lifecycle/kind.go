package lifecycle

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumix"
)

// This file is the seam between the resources and the component that registers them. Beside
// each resource are the view of its outputs (one field per property of its State the component
// reads; Registered when it reads none) and its Kind, which registers it under its type token. Its inputs are its Args themselves: the
// component sets Pulumi inputs on the Args' fields (Set), so a property's name and type come from
// one place. The tests check the Args and the outputs view against the State and the served
// schema, so a renamed or added argument fails there instead of at `pulumi up`.

// tokenPrefix is how infer names the resources of this Go package: the plugin's package name
// (the component provider's Name), then the module, the last element of the package path.
const tokenPrefix = "talos-proxmox:lifecycle:"

// Registered is the view of a resource whose outputs the component does not read: it waits for
// the resource (depends on it), nothing more.
type Registered struct{ pulumi.CustomResourceState }

// CredentialsOutputs is the view of a resource that puts out the cluster's admin credentials:
// ClientCredentials issues them, ClusterHealth passes them on once the cluster is healthy.
type CredentialsOutputs struct {
	pulumi.CustomResourceState

	// Talosconfig is the admin talosconfig.
	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
	// Kubeconfig is the admin kubeconfig.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
}

// Kind is one resource as the component registers it: its type token, its Args (A) and the view
// of its outputs (O, registered through P = *O).
type Kind[A, O any, P interface {
	*O
	pulumi.CustomResource
}] struct {
	// Token is the resource's type token.
	Token string
}

// kindOf is the Kind of resource R, with Args A and outputs O. Its type token is the one infer
// gives R (TestKindsCoverSchema checks it).
func kindOf[R, A, O any, P interface {
	*O
	pulumi.CustomResource
}]() Kind[A, O, P] {
	return Kind[A, O, P]{Token: tokenPrefix + reflect.TypeFor[R]().Name()}
}

// Inputs starts the inputs of a resource of kind k: set them on the fields of args with Set.
func (k Kind[A, O, P]) Inputs() (in *Inputs[A], args *A) {
	return NewInputs[A]()
}

// Register registers a resource of kind k named name with inputs in, and returns the view of its
// outputs. Leaving out an input the resource requires is an error.
func (k Kind[A, O, P]) Register(ctx *pulumi.Context, name string, in *Inputs[A], opts ...pulumi.ResourceOption) (P, error) {
	props, err := in.propertyMap()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", k.Token, name, err)
	}

	out := P(new(O))
	if err := ctx.RegisterResource(k.Token, name, props, out, opts...); err != nil {
		return nil, err
	}

	return out, nil
}

// Inputs are Pulumi inputs for the properties of A (a resource's Args, or an object in them),
// each set on the A field that declares the property.
type Inputs[A any] struct {
	// args is the A whose fields' addresses name the properties.
	args A
	// set is the input set on each field, by the field's address.
	set map[any]pulumi.Input
}

// NewInputs starts inputs for the properties of A: set them on the fields of args with Set.
func NewInputs[A any]() (in *Inputs[A], args *A) {
	in = &Inputs[A]{set: map[any]pulumi.Input{}}

	return in, &in.args
}

// Set sets field, a field of the args NewInputs (or Kind.Inputs) gave with in, to v: a Pulumi
// input of the field's Go type. A nil v leaves the property out.
func Set[A, T any](in *Inputs[A], field *T, v pulumix.Input[T]) {
	if v != nil {
		in.set[field] = v
	}
}

// SetEach sets field, a map of objects T, to the inputs each entry of v holds.
func SetEach[A, T any](in *Inputs[A], field *map[string]T, v map[string]*Inputs[T]) {
	in.set[field] = inputsMap[T](v)
}

// inputsMap is the inputs of a map's objects.
type inputsMap[T any] map[string]*Inputs[T]

// ElementType makes an inputsMap a pulumi.Input (turned into a pulumi.Map by propertyMap).
func (inputsMap[T]) ElementType() reflect.Type { return reflect.TypeFor[map[string]T]() }

// propertyMap is the inputs as the property map Pulumi registers: each set field under its
// `pulumi` tag, embedded structs' fields included. A property A requires that was not set, and an
// input set on a field that is not one of A's properties, are errors.
func (in *Inputs[A]) propertyMap() (pulumi.Map, error) {
	m := pulumi.Map{}
	args := reflect.ValueOf(&in.args).Elem()

	var errs []error

	for _, f := range reflect.VisibleFields(args.Type()) {
		name, optional, ok := tagOf(f)
		if !ok {
			continue // an embedded struct: its fields follow, promoted
		}

		switch v := in.set[args.FieldByIndex(f.Index).Addr().Interface()].(type) {
		case nil:
			if !optional {
				errs = append(errs, fmt.Errorf("the input %s is required", name))
			}
		case interface{ propertyMaps() (pulumi.Map, error) }:
			objs, err := v.propertyMaps()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}

			m[name] = objs
		default:
			m[name] = v
		}
	}

	if len(m) != len(in.set) {
		errs = append(errs, fmt.Errorf("%d inputs are set on fields that are not properties of this %s", len(in.set)-len(m), args.Type()))
	}

	return m, errors.Join(errs...)
}

// propertyMaps is each object's inputs as a pulumi.Map, by key.
func (v inputsMap[T]) propertyMaps() (pulumi.Map, error) {
	m := pulumi.Map{}

	var errs []error

	for key, obj := range v {
		props, err := obj.propertyMap()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}

		m[key] = props
	}

	return m, errors.Join(errs...)
}

// tagOf reads a field's `pulumi` tag: the property's name and whether it is optional. ok is false
// for a field with no tag (an embedded struct, whose fields are the properties).
func tagOf(f reflect.StructField) (name string, optional, ok bool) {
	tag, ok := f.Tag.Lookup("pulumi")
	if !ok || !f.IsExported() {
		return "", false, false
	}

	name, opts, _ := strings.Cut(tag, ",")

	return name, slices.Contains(strings.Split(opts, ","), "optional"), true
}
