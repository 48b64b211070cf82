package lifecycle

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// This file is the seam between the resources and the component that registers them. Beside
// each resource are its type token, its inputs as Pulumi inputs (one field per input property of
// its Args, tagged with the property's name, with the heads' inputs embedded where the Args
// embed the heads), the view of its outputs (one field per property of its State), and its Kind,
// which registers it. The tests check the tags and types against the Args, the State and the
// served schema, so a renamed or added argument fails there instead of at `pulumi up`.

// tokenPrefix is how infer names the resources of this Go package: the plugin's package name
// (the component provider's Name), then the module, the last element of the package path.
const tokenPrefix = "talos-proxmox:lifecycle:"

// Registered is the view of a resource whose outputs the component does not read: it waits for
// the resource (depends on it), nothing more.
type Registered struct{ pulumi.CustomResourceState }

// Kind is one resource as the component registers it: its type token, the struct of its inputs
// (I) and the view of its outputs (O, registered through P = *O).
type Kind[I, O any, P interface {
	*O
	pulumi.CustomResource
}] struct {
	// Token is the resource's type token.
	Token string
	// args is the resource's Args: Register refuses inputs that leave a required one out.
	args reflect.Type
}

// kindOf is the Kind of the resource with Args A, type token token, inputs I and outputs O.
func kindOf[A, I, O any, P interface {
	*O
	pulumi.CustomResource
}](token string) Kind[I, O, P] {
	return Kind[I, O, P]{Token: token, args: reflect.TypeFor[A]()}
}

// Register registers a resource of kind k named name with inputs in, and returns the view of its
// outputs. Nil inputs are left out; leaving out an input the resource requires is an error.
func (k Kind[I, O, P]) Register(ctx *pulumi.Context, name string, in I, opts ...pulumi.ResourceOption) (P, error) {
	props, err := inputMap(reflect.ValueOf(in))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", k.Token, name, err)
	}

	for _, f := range reflect.VisibleFields(k.args) {
		if prop, optional, ok := tagOf(f); ok && !optional && props[prop] == nil {
			return nil, fmt.Errorf("%s %s: the input %s is required", k.Token, name, prop)
		}
	}

	out := P(new(O))
	if err := ctx.RegisterResource(k.Token, name, props, out, opts...); err != nil {
		return nil, err
	}

	return out, nil
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

// inputMap is an inputs struct as the property map Pulumi registers: its fields, those of
// embedded structs included, by their `pulumi` tags, without the nil ones. (The SDK's own
// marshalling of an Input struct does not flatten embedded structs.)
func inputMap(v reflect.Value) (pulumi.Map, error) {
	m := pulumi.Map{}

	for _, f := range reflect.VisibleFields(v.Type()) {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue // its fields follow, promoted
		}

		name, _, ok := tagOf(f)
		if !ok {
			return nil, fmt.Errorf("%s.%s has no pulumi tag", v.Type(), f.Name)
		}

		in, err := toInput(v.FieldByIndex(f.Index))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}

		if in != nil {
			m[name] = in
		}
	}

	return m, nil
}

// toInput is one field's value as a Pulumi input: an input as it is, a struct or a map of them as
// a pulumi.Map; nil when it is nil.
func toInput(v reflect.Value) (pulumi.Input, error) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
	}

	if in, ok := v.Interface().(pulumi.Input); ok {
		return in, nil
	}

	switch {
	case v.Kind() == reflect.Struct:
		return inputMap(v)
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		m := pulumi.Map{}

		for it := v.MapRange(); it.Next(); {
			in, err := toInput(it.Value())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", it.Key(), err)
			}

			if in != nil {
				m[it.Key().String()] = in
			}
		}

		return m, nil
	default:
		return nil, fmt.Errorf("%s is not a Pulumi input", v.Type())
	}
}
