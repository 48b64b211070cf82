// Package yamlexample reads examples/yaml, the YAML program of the example cluster, as the tests
// that check it against the schema and construct it need it: the TalosProxmoxCluster's
// properties with the program's config defaults (and any overrides) filled in, as `pulumi
// preview` on a stack without config would.
package yamlexample

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v4"
)

// yamlProgram is the part of a Pulumi YAML program Load reads.
type yamlProgram struct {
	Config    map[string]struct{ Default any } `yaml:"config"`
	Resources map[string]struct {
		Type       string         `yaml:"type"`
		Properties map[string]any `yaml:"properties"`
	} `yaml:"resources"`
}

var interpolation = regexp.MustCompile(`\$\{([A-Za-z]+)(?:\[(\d+)\])?\}`)

// resolve replaces ${key} and ${key[i]} with config values.
func resolve(v any, config map[string]any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			r, err := resolve(e, config)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := []any{}
		for _, e := range x {
			r, err := resolve(e, config)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	case string:
		if m := interpolation.FindStringSubmatch(x); m != nil && m[0] == x {
			val, ok := config[m[1]]
			if !ok {
				return nil, fmt.Errorf("%s refers to config %q, which has no default", x, m[1])
			}
			if m[2] != "" {
				i, _ := strconv.Atoi(m[2])
				return val.([]any)[i], nil
			}
			return val, nil
		}
		return interpolation.ReplaceAllStringFunc(x, func(s string) string {
			m := interpolation.FindStringSubmatch(s)
			return fmt.Sprint(config[m[1]])
		}), nil
	default:
		return v, nil
	}
}

// Load returns the properties of the resource of type token in the YAML program at path, with
// config resolved from the program's defaults, then from overrides. Any other resource in the
// program is an error.
func Load(path, token string, overrides map[string]any) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}

	var prog yamlProgram
	if err := yaml.Unmarshal(raw, &prog); err != nil {
		return nil, err
	}

	config := map[string]any{}
	for k, c := range prog.Config {
		config[k] = c.Default
	}

	maps.Copy(config, overrides)

	for name, r := range prog.Resources {
		if r.Type != token {
			return nil, fmt.Errorf("resource %s has unexpected type %s", name, r.Type)
		}

		props, err := resolve(r.Properties, config)
		if err != nil {
			return nil, err
		}

		return props.(map[string]any), nil
	}

	return nil, fmt.Errorf("no %s in %s", token, path)
}
