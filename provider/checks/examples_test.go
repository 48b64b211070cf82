package checks

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/yamlexample"
)

// TestYAMLExampleMatchesSchema checks every property of the YAML example against schema.json:
// names, types, required properties.
func TestYAMLExampleMatchesSchema(t *testing.T) {
	t.Parallel()

	raw, err := os.ReadFile("../../schema.json")
	if err != nil {
		t.Fatal(err)
	}

	var s struct {
		Resources map[string]struct {
			InputProperties map[string]map[string]any `json:"inputProperties"`
			RequiredInputs  []string                  `json:"requiredInputs"`
		} `json:"resources"`
		Types map[string]struct {
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		} `json:"types"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}

	var checkValue func(path string, typ map[string]any, v any)
	checkObject := func(path string, props map[string]map[string]any, required []string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: want an object, got %T", path, v)
			return
		}
		for k, e := range m {
			p, ok := props[k]
			if !ok {
				t.Errorf("%s.%s: no such property in schema.json", path, k)
				continue
			}
			checkValue(path+"."+k, p, e)
		}
		for _, r := range required {
			if _, ok := m[r]; !ok {
				t.Errorf("%s: required property %s missing", path, r)
			}
		}
	}
	checkValue = func(path string, typ map[string]any, v any) {
		if typ["$ref"] == "pulumi.json#/Any" {
			return // free-form (Helm values)
		}

		if ref, ok := typ["$ref"].(string); ok {
			token := strings.TrimPrefix(ref, "#/types/")
			ty := s.Types[token]
			checkObject(path, ty.Properties, ty.Required, v)
			return
		}
		switch typ["type"] {
		case "string":
			if _, ok := v.(string); !ok {
				t.Errorf("%s: want a string, got %T", path, v)
			}
		case "integer":
			if _, ok := v.(int); !ok {
				t.Errorf("%s: want an integer, got %T (%v)", path, v, v)
			}
		case "boolean":
			if _, ok := v.(bool); !ok {
				t.Errorf("%s: want a boolean, got %T", path, v)
			}
		case "array":
			arr, ok := v.([]any)
			if !ok {
				t.Errorf("%s: want an array, got %T", path, v)
				return
			}
			for i, e := range arr {
				checkValue(fmt.Sprintf("%s[%d]", path, i), typ["items"].(map[string]any), e)
			}
		case "object":
			m, ok := v.(map[string]any)
			if !ok {
				t.Errorf("%s: want a map, got %T", path, v)
				return
			}
			for k, e := range m {
				checkValue(path+"."+k, typ["additionalProperties"].(map[string]any), e)
			}
		default:
			t.Errorf("%s: unhandled schema type %v", path, typ)
		}
	}

	r := s.Resources[provider.ClusterToken]
	props, err := yamlexample.Load("../../examples/yaml/Pulumi.yaml", provider.ClusterToken, nil)
	if err != nil {
		t.Fatal(err)
	}

	checkObject("homelab", r.InputProperties, r.RequiredInputs, props)
}
