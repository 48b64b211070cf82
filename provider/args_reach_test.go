package provider

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/wire"
)

// TestEveryInputReachesTheSpecOrThePassThrough walks every field of the Args types,
// recursively (node fields, list items, nested objects), sets it to a value of its own and
// requires the change to show in what specInput hands on: the plain spec input or the
// pass-through of Pulumi inputs; and a change of the plain spec input must then show in what
// spec.Build makes of it (the cluster, or the problems it reports). The baseline of each field
// already holds the list item or object the field sits in, with zero values, so only the field
// itself differs. An input added to Args but dropped on the way fails here.
func TestEveryInputReachesTheSpecOrThePassThrough(t *testing.T) {
	t.Parallel()

	fields := argFields(reflect.TypeFor[TalosProxmoxClusterArgs](), "")
	if len(fields) < 60 {
		t.Fatalf("only %d input fields found; the walk is broken", len(fields))
	}

	type result struct {
		in   spec.Input
		pass wire.PassThrough
	}

	convert := func(ctx *pulumi.Context, f argField, leaf variant) (result, error) {
		a := homelabArgs()
		f.set(reflect.ValueOf(&a).Elem(), leaf)

		in, pass, err := specInput(ctx, &a)

		return result{in, pass}, err
	}

	built := func(in spec.Input) string {
		c, err := spec.Build(in)
		return fmt.Sprintf("%#v\n%v", c, err)
	}

	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		for _, f := range fields {
			base, err := convert(ctx, f, containerOnly)
			if err != nil {
				return fmt.Errorf("%s: %w", f.path, err)
			}

			var why string

			for _, v := range []variant{leafValue, leafFalse} {
				got, err := convert(ctx, f, v)
				if err != nil {
					return fmt.Errorf("%s: %w", f.path, err)
				}

				switch {
				case !reflect.DeepEqual(got.pass, base.pass):
					why = "" // a Pulumi input carried to the children as it is
				case reflect.DeepEqual(got.in, base.in):
					why = "changing it changes neither the spec input nor the pass-through; the input is dropped"
				case built(got.in) == built(base.in):
					why = "reaches the spec input, but spec.Build ignores it (same cluster, same problems)"
				default:
					why = ""
				}

				if why == "" {
					break
				}
			}

			if why != "" {
				t.Errorf("%s: %s", f.path, why)
			}
		}

		return nil
	}, pulumi.WithMocks("project", "stack", &mockMonitor{}))
	if err != nil {
		t.Fatal(err)
	}

	t.Logf("%d input fields reach the spec or the pass-through", len(fields))
}

// variant selects what set does: only create what holds the field (a list item, an object) with
// zero values, or also give the field a value of its own; a bool gets both true and false, as
// one of them may be the default.
type variant int

const (
	containerOnly variant = iota
	leafValue
	leafFalse
)

// argField is one input field and how to give it a value of its own in a valid Args.
type argField struct {
	path string
	set  func(args reflect.Value, leaf variant)
}

// argFields lists the leaf fields of struct type t. Nodes are reached through the node
// `cp-1` of homelabArgs; list items through a one-item list.
func argFields(t reflect.Type, at string) []argField {
	var out []argField

	for i := range t.NumField() {
		sf := t.Field(i)
		name := strings.Split(sf.Tag.Get("pulumi"), ",")[0]
		path := strings.TrimPrefix(at+"."+name, ".")
		idx := i

		inField := func(set func(reflect.Value, variant)) func(reflect.Value, variant) {
			return func(v reflect.Value, leaf variant) { set(v.Field(idx), leaf) }
		}

		ft := sf.Type
		switch {
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			for _, sub := range argFields(ft.Elem(), path) {
				out = append(out, argField{sub.path, inField(func(v reflect.Value, leaf variant) {
					if v.IsNil() {
						v.Set(reflect.New(ft.Elem()))
					}
					sub.set(v.Elem(), leaf)
				})})
			}
		case ft.Kind() == reflect.Struct:
			for _, sub := range argFields(ft, path) {
				out = append(out, argField{sub.path, inField(func(v reflect.Value, leaf variant) { sub.set(v, leaf) })})
			}
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			for _, sub := range argFields(ft.Elem(), path+".cp-1") {
				out = append(out, argField{sub.path, inField(func(v reflect.Value, leaf variant) {
					key := reflect.ValueOf("cp-1")
					n := reflect.New(ft.Elem()).Elem()
					n.Set(v.MapIndex(key))
					sub.set(n, leaf)
					v.SetMapIndex(key, n)
				})})
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			for _, sub := range argFields(ft.Elem(), path+"[0]") {
				out = append(out, argField{sub.path, inField(func(v reflect.Value, leaf variant) {
					item := reflect.New(ft.Elem()).Elem()
					sub.set(item, leaf)
					v.Set(reflect.Append(reflect.MakeSlice(ft, 0, 1), item))
				})})
			}
		default:
			out = append(out, argField{path, inField(func(v reflect.Value, leaf variant) {
				switch leaf {
				case leafValue:
					v.Set(distinct(ft, path))
				case leafFalse:
					if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Bool {
						v.Set(reflect.New(ft.Elem()))
					} else {
						v.Set(distinct(ft, path))
					}
				}
			})})
		}
	}

	return out
}

// distinct is a value of type t that no test Args uses, derived from the field's path.
func distinct(t reflect.Type, path string) reflect.Value {
	s := "reach-" + strings.NewReplacer(".", "-", "[", "-", "]", "").Replace(path)

	switch t {
	case reflect.TypeFor[pulumi.StringArrayInput]():
		return reflect.ValueOf(pulumi.ToStringArray([]string{s})).Convert(t)
	case reflect.TypeFor[pulumi.StringInput]():
		return reflect.ValueOf(pulumi.String(s)).Convert(t)
	}

	switch t.Kind() {
	case reflect.String:
		return reflect.ValueOf(s).Convert(t)
	case reflect.Int:
		return reflect.ValueOf(len(s) + 4000).Convert(t)
	case reflect.Pointer:
		v := reflect.New(t.Elem())
		v.Elem().Set(distinct(t.Elem(), path))

		return v
	case reflect.Bool:
		// homelabArgs leaves every bool unset; any set value (pointer to it) is a change.
		return reflect.ValueOf(true)
	case reflect.Slice:
		return reflect.Append(reflect.MakeSlice(t, 0, 1), distinct(t.Elem(), path))
	case reflect.Map:
		m := reflect.MakeMap(t)
		m.SetMapIndex(reflect.ValueOf(s), distinct(t.Elem(), path))

		return m
	case reflect.Interface:
		return reflect.ValueOf(s)
	}

	panic(fmt.Sprintf("%s: no distinct value for %s", path, t))
}
