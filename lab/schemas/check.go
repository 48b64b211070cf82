// Package schemas holds the published schemas of the child providers the component uses —
// proxmoxve v7.13.0 and talos v0.7.1, copied unchanged from their releases — and checks
// resource inputs and function arguments against them, as the providers' Check does.
package schemas

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// The published schemas, unchanged.
var (
	//go:embed talos-v0.7.1.schema.json
	TalosJSON []byte
	//go:embed proxmoxve-v7.13.0.schema.json
	ProxmoxveJSON []byte
)

// Schema is a parsed published schema.
type Schema struct {
	Name      string                    `json:"name"`
	Version   string                    `json:"version"`
	Resources map[string]resourceSpec   `json:"resources"`
	Functions map[string]functionSpec   `json:"functions"`
	Types     map[string]objectSpec     `json:"types"`
	Provider  resourceSpec              `json:"provider"`
	Config    map[string]map[string]any `json:"config"`
}

type resourceSpec struct {
	InputProperties map[string]map[string]any `json:"inputProperties"`
	RequiredInputs  []string                  `json:"requiredInputs"`
	Properties      map[string]map[string]any `json:"properties"`
	Required        []string                  `json:"required"`
}

type functionSpec struct {
	Inputs  objectSpec `json:"inputs"`
	Outputs objectSpec `json:"outputs"`
}

type objectSpec struct {
	Properties map[string]map[string]any `json:"properties"`
	Required   []string                  `json:"required"`
}

// Parse parses a schema.
func Parse(text []byte) (*Schema, error) {
	var s Schema
	if err := json.Unmarshal(text, &s); err != nil {
		return nil, fmt.Errorf("parsing a provider schema: %w", err)
	}

	return &s, nil
}

// Talos is the parsed talos v0.7.1 schema.
func Talos() (*Schema, error) { return Parse(TalosJSON) }

// Proxmoxve is the parsed proxmoxve v7.13.0 schema.
func Proxmoxve() (*Schema, error) { return Parse(ProxmoxveJSON) }

// resolve finds a referenced type. Nine references in the published schema read `#types/…`
// (missing slash); both forms are accepted.
func (s *Schema) resolve(ref string) (objectSpec, bool) {
	token := strings.TrimPrefix(strings.TrimPrefix(ref, "#/types/"), "#types/")
	t, ok := s.Types[token]

	return t, ok
}

// CheckResource validates resource inputs against the schema: unknown properties, missing
// required properties and wrong types are failures, as the real provider's Check reports them.
func (s *Schema) CheckResource(token string, inputs property.Map) []p.CheckFailure {
	r, ok := s.Resources[token]
	if !ok {
		return []p.CheckFailure{{Reason: fmt.Sprintf("unknown resource type %s", token)}}
	}

	return s.checkObject("", r.InputProperties, r.RequiredInputs, inputs)
}

// CheckFunction validates function arguments against the schema.
func (s *Schema) CheckFunction(token string, args property.Map) []p.CheckFailure {
	f, ok := s.Functions[token]
	if !ok {
		return []p.CheckFailure{{Reason: fmt.Sprintf("unknown function %s", token)}}
	}

	return s.checkObject("", f.Inputs.Properties, f.Inputs.Required, args)
}

func (s *Schema) checkObject(path string, props map[string]map[string]any, required []string, m property.Map) []p.CheckFailure {
	var out []p.CheckFailure

	keys := make([]string, 0, m.Len())
	for k := range m.All {
		keys = append(keys, k)
	}

	slices.Sort(keys)

	for _, k := range keys {
		v := m.Get(k)
		spec, ok := props[k]
		if !ok {
			out = append(out, p.CheckFailure{Property: join(path, k), Reason: fmt.Sprintf("unknown property %q", k)})
			continue
		}

		out = append(out, s.checkValue(join(path, k), spec, v)...)
	}

	for _, r := range required {
		if v, ok := m.GetOk(r); !ok || v.IsNull() {
			out = append(out, p.CheckFailure{Property: join(path, r), Reason: fmt.Sprintf("missing required property %q", r)})
		}
	}

	return out
}

func (s *Schema) checkValue(path string, spec map[string]any, v property.Value) []p.CheckFailure {
	if v.IsNull() || v.IsComputed() {
		return nil
	}

	fail := func(want string) []p.CheckFailure {
		return []p.CheckFailure{{Property: path, Reason: fmt.Sprintf("expected %s, got %s", want, kind(v))}}
	}

	if ref, ok := spec["$ref"].(string); ok {
		t, ok := s.resolve(ref)
		if !ok {
			return []p.CheckFailure{{Property: path, Reason: "unresolvable type " + ref}}
		}

		if !v.IsMap() {
			return fail("an object")
		}

		return s.checkObject(path, t.Properties, t.Required, v.AsMap())
	}

	switch spec["type"] {
	case "string":
		if !v.IsString() {
			return fail("a string")
		}
	case "integer", "number":
		if !v.IsNumber() {
			return fail("a number")
		}
	case "boolean":
		if !v.IsBool() {
			return fail("a boolean")
		}
	case "array":
		if !v.IsArray() {
			return fail("an array")
		}

		items, _ := spec["items"].(map[string]any)
		var out []p.CheckFailure
		for i, e := range v.AsArray().All {
			out = append(out, s.checkValue(fmt.Sprintf("%s[%d]", path, i), items, e)...)
		}

		return out
	case "object":
		if !v.IsMap() {
			return fail("an object")
		}
	}

	return nil
}

func kind(v property.Value) string {
	switch {
	case v.IsString():
		return "a string"
	case v.IsNumber():
		return "a number"
	case v.IsBool():
		return "a boolean"
	case v.IsArray():
		return "an array"
	case v.IsMap():
		return "an object"
	default:
		return "another type"
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}

	return path + "." + key
}
