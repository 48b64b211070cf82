package provider

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// inputTypes maps every object type of the component's inputs to its Go type. A property is
// plain exactly where its Go field is not a pulumi.Input: Construct refuses outputs, secrets and
// unknowns there, so the SDKs must not promise to accept them.
var inputTypes = map[string]reflect.Type{
	ClusterToken:                         reflect.TypeFor[TalosProxmoxClusterArgs](),
	"talos-proxmox:index:Node":           reflect.TypeFor[Node](),
	"talos-proxmox:index:NodeDefaults":   reflect.TypeFor[NodeDefaults](),
	"talos-proxmox:index:Network":        reflect.TypeFor[Network](),
	"talos-proxmox:index:Image":          reflect.TypeFor[Image](),
	"talos-proxmox:index:DataDisk":       reflect.TypeFor[DataDisk](),
	"talos-proxmox:index:PciDevice":      reflect.TypeFor[PciDevice](),
	"talos-proxmox:index:InlineManifest": reflect.TypeFor[InlineManifest](),
	"talos-proxmox:index:Cilium":         reflect.TypeFor[Cilium](),
	"talos-proxmox:index:HelmChart":      reflect.TypeFor[HelmChart](),
}

var inputInterface = reflect.TypeFor[pulumi.Input]()

// isPlainField reports whether a Go field takes only plain values.
func isPlainField(t reflect.Type) bool {
	return !t.Implements(inputInterface)
}

// fieldsByName maps each pulumi property name of a struct to its Go field type.
func fieldsByName(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}

	for _, f := range reflect.VisibleFields(t) {
		tag, ok := f.Tag.Lookup("pulumi")
		if !ok {
			continue
		}

		out[strings.Split(tag, ",")[0]] = f.Type
	}

	return out
}

// fixSchema gives the component and its types their descriptions (describeSchema) and marks
// plain properties plain (infer only marks top-level primitives).
func fixSchema(text string) (string, error) {
	var s map[string]any
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return "", err
	}

	resources, _ := s["resources"].(map[string]any)
	types, _ := s["types"].(map[string]any)

	if err := describeSchema(resources, types); err != nil {
		return "", err
	}

	for token, goType := range inputTypes {
		var props map[string]any

		if token == ClusterToken {
			r, ok := resources[token].(map[string]any)
			if !ok {
				return "", fmt.Errorf("schema has no resource %s", token)
			}

			props, _ = r["inputProperties"].(map[string]any)
		} else {
			t, ok := types[token].(map[string]any)
			if !ok {
				return "", fmt.Errorf("schema has no type %s", token)
			}

			props, _ = t["properties"].(map[string]any)
		}

		fields := fieldsByName(goType)
		for name, prop := range props {
			ft, ok := fields[name]
			if !ok {
				return "", fmt.Errorf("%s.%s has no Go field", token, name)
			}

			if isPlainField(ft) {
				markPlain(prop.(map[string]any))
			} else {
				// infer marks the elements of a top-level StringArrayInput plain; Construct
				// accepts an output or secret per element, so the SDKs should too.
				unmarkPlain(prop.(map[string]any))
			}
		}
	}

	out, err := json.Marshal(s)
	if err != nil {
		return "", err
	}

	return string(out), nil
}

// unmarkPlain clears plain from a type spec and its element types.
func unmarkPlain(t map[string]any) {
	delete(t, "plain")

	if items, ok := t["items"].(map[string]any); ok {
		unmarkPlain(items)
	}

	if ap, ok := t["additionalProperties"].(map[string]any); ok {
		unmarkPlain(ap)
	}
}

// markPlain marks a type spec and its element types plain.
func markPlain(t map[string]any) {
	t["plain"] = true

	if items, ok := t["items"].(map[string]any); ok {
		markPlain(items)
	}

	if ap, ok := t["additionalProperties"].(map[string]any); ok {
		markPlain(ap)
	}
}
