package provider

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
)

// yamlProgram is the part of a Pulumi YAML program these tests read.
type yamlProgram struct {
	Config    map[string]struct{ Default any } `yaml:"config"`
	Resources map[string]struct {
		Type       string         `yaml:"type"`
		Properties map[string]any `yaml:"properties"`
	} `yaml:"resources"`
}

var interpolation = regexp.MustCompile(`\$\{([A-Za-z]+)(?:\[(\d+)\])?\}`)

// resolveConfig replaces ${key} and ${key[i]} with the config defaults, as `pulumi preview` on a
// stack without config would.
func resolveConfig(t *testing.T, v any, config map[string]any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = resolveConfig(t, e, config)
		}
		return out
	case []any:
		out := []any{}
		for _, e := range x {
			out = append(out, resolveConfig(t, e, config))
		}
		return out
	case string:
		if m := interpolation.FindStringSubmatch(x); m != nil && m[0] == x {
			val, ok := config[m[1]]
			if !ok {
				t.Fatalf("%s refers to config %q, which has no default", x, m[1])
			}
			if m[2] != "" {
				i, _ := strconv.Atoi(m[2])
				return val.([]any)[i]
			}
			return val
		}
		return interpolation.ReplaceAllStringFunc(x, func(s string) string {
			m := interpolation.FindStringSubmatch(s)
			return fmt.Sprint(config[m[1]])
		})
	default:
		return v
	}
}

// loadYAMLExample returns the example's cluster properties with config resolved from the
// defaults, then from overrides.
func loadYAMLExample(t *testing.T, overrides map[string]any) map[string]any {
	t.Helper()

	raw, err := os.ReadFile("../examples/yaml/Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}

	var prog yamlProgram
	if err := yaml.Unmarshal(raw, &prog); err != nil {
		t.Fatal(err)
	}

	config := map[string]any{}
	for k, c := range prog.Config {
		config[k] = c.Default
	}

	maps.Copy(config, overrides)

	for name, r := range prog.Resources {
		if r.Type == ClusterToken {
			return resolveConfig(t, r.Properties, config).(map[string]any)
		}
		t.Fatalf("resource %s has unexpected type %s", name, r.Type)
	}

	t.Fatal("no TalosProxmoxCluster in the YAML example")
	return nil
}

// TestYAMLExampleMatchesSchema checks every property of the YAML example against schema.json:
// names, types, required properties.
func TestYAMLExampleMatchesSchema(t *testing.T) {
	t.Parallel()

	raw, err := os.ReadFile("../schema.json")
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

	r := s.Resources[ClusterToken]
	checkObject("homelab", r.InputProperties, r.RequiredInputs, loadYAMLExample(t, nil))
}

// TestYAMLExampleConstructs constructs the YAML example, with Cilium from a chart repository on
// loopback instead of https://helm.cilium.io.
func TestYAMLExampleConstructs(t *testing.T) {
	t.Setenv(helmrender.CacheEnv, t.TempDir())

	repo := helmtest.Repository(t, helmtest.CiliumArchive(t))
	props := loadYAMLExample(t, map[string]any{"ciliumRepository": repo.URL})
	text, err := json.Marshal(props)
	if err != nil {
		t.Fatal(err)
	}

	r := &recorder{}
	if _, err := construct(t, r, "homelab", inputsFromJSON(t, string(text))); err != nil {
		t.Fatal(err)
	}

	if n := len(r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine")); n != 5 {
		t.Errorf("%d VMs, want 5", n)
	}

	if n := len(r.ofType("proxmoxve:Download/file:File")); n != 3 {
		t.Errorf("%d downloads, want 3 (three hosts)", n)
	}

	for host, cfg := range nodeConfigs(t, r) {
		names, _ := manifestsOf(cfg)
		hasCilium := slices.Contains(names, "helm-cilium")
		if hasCilium != strings.HasPrefix(host, "cp-") {
			t.Errorf("%s: carries helm-cilium = %v", host, hasCilium)
		}
	}

	var hosts []string
	for _, vm := range r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine") {
		hosts = append(hosts, vm.Inputs.Get("nodeName").AsString())
	}
	slices.Sort(hosts)
	if strings.Join(slices.Compact(hosts), ",") != "pve1,pve2,pve3" {
		t.Errorf("hosts = %v", hosts)
	}
}
