package provider

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// checkPlainInputs rejects secrets, unknown values and resource outputs where the component
// needs plain values (they decide the shape of the resource graph), naming each property.
// Without it, the Pulumi SDK fails deep in input decoding with an error that names Go types.
func checkPlainInputs(inputs property.Map) error {
	var errs []error

	walkPlain(reflect.TypeFor[TalosProxmoxClusterArgs](), property.New(inputs), "", &errs)

	if len(errs) == 0 {
		return nil
	}

	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })

	msg := "invalid TalosProxmoxCluster inputs: these properties must be plain values of the documented type, known " +
		"before deployment (they decide which resources exist), not outputs of other resources, secrets or unknowns:"
	for _, e := range errs {
		msg += "\n  - " + e.Error()
	}

	return errors.New(msg)
}

func walkPlain(t reflect.Type, v property.Value, path string, errs *[]error) {
	if v.IsNull() {
		return
	}

	if t.Implements(inputInterface) {
		return // accepts outputs and secrets
	}

	switch {
	case v.IsComputed():
		*errs = append(*errs, fmt.Errorf("%s: is unknown until another resource is created", orRoot(path)))
		return
	case v.Secret():
		*errs = append(*errs, fmt.Errorf("%s: is a secret; pass a plain value (secrets are accepted in configPatches and inlineManifests[].contents)", orRoot(path)))
		return
	case len(v.Dependencies()) > 0:
		*errs = append(*errs, fmt.Errorf("%s: is an output of %s; pass a plain value", orRoot(path), v.Dependencies()[0]))
		return
	}

	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}

	wrong := func(want string) {
		*errs = append(*errs, fmt.Errorf("%s: expected %s, got %s", orRoot(path), want, describe(v)))
	}

	switch t.Kind() {
	case reflect.Struct:
		if !v.IsMap() {
			wrong("an object")
			return
		}

		fields := fieldsByName(t)
		for k, fv := range v.AsMap().All {
			if ft, ok := fields[k]; ok {
				walkPlain(ft, fv, join(path, k), errs)
			}
		}
	case reflect.Map:
		if !v.IsMap() {
			wrong("a map")
			return
		}

		for k, ev := range v.AsMap().All {
			walkPlain(t.Elem(), ev, join(path, k), errs)
		}
	case reflect.Slice:
		if !v.IsArray() {
			wrong("a list")
			return
		}

		for i, ev := range v.AsArray().All {
			walkPlain(t.Elem(), ev, fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.String:
		if !v.IsString() {
			wrong("a string")
		}
	case reflect.Bool:
		if !v.IsBool() {
			wrong("true or false")
		}
	case reflect.Int:
		if !v.IsNumber() || v.AsNumber() != math.Trunc(v.AsNumber()) {
			wrong("a whole number")
		}
	case reflect.Interface:
		// Free-form values (Helm chart values): any shape, but plain all the way down.
		switch {
		case v.IsMap():
			for k, ev := range v.AsMap().All {
				walkPlain(t, ev, join(path, k), errs)
			}
		case v.IsArray():
			for i, ev := range v.AsArray().All {
				walkPlain(t, ev, fmt.Sprintf("%s[%d]", path, i), errs)
			}
		}
	default:
	}
}

func describe(v property.Value) string {
	switch {
	case v.IsString():
		return fmt.Sprintf("the string %q", v.AsString())
	case v.IsNumber():
		return fmt.Sprintf("the number %v", v.AsNumber())
	case v.IsBool():
		return fmt.Sprintf("%v", v.AsBool())
	case v.IsArray():
		return "a list"
	case v.IsMap():
		return "an object"
	default:
		return "another kind of value"
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}

	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(inputs)"
	}

	return path
}
