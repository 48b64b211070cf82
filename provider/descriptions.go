package provider

import (
	_ "embed"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// descriptionsFile holds the schema's descriptions of the component's types, keyed by Go type
// and property name. They are data rather than struct tags because most are long and many quote
// names in backquotes, which a Go struct tag cannot hold.
//
//go:embed descriptions.yaml
var descriptionsFile []byte

// typeDescriptions is one type's entry in descriptions.yaml: its own description (empty for
// TalosProxmoxClusterArgs, whose description is the component's) and its properties'.
type typeDescriptions struct {
	Description string            `json:"description"`
	Properties  map[string]string `json:"properties"`
}

// descriptions are the entries of descriptions.yaml by Go type name. The file is embedded, so
// any test of the package fails when it does not parse.
var descriptions = mustParseDescriptions(descriptionsFile)

func mustParseDescriptions(b []byte) map[string]typeDescriptions {
	var d map[string]typeDescriptions
	if err := yaml.UnmarshalStrict(b, &d); err != nil {
		panic(fmt.Sprintf("descriptions.yaml: %v", err))
	}

	return d
}

// describeSchema gives the component (its description, its outputs), its inputs and the object
// types of this package in the schema their descriptions from descriptions.yaml. It is one pass
// over the schema, so no Go type needs an Annotate for it: a type's token ends with its Go name
// (infer names it so) and a property is named by its `pulumi` tag, as the file's keys are. A
// property the file leaves out stays undescribed, which TestDescriptionsMatchSchema reports.
func describeSchema(resources, types map[string]any) error {
	component, ok := resources[ClusterToken].(map[string]any)
	if !ok {
		return fmt.Errorf("schema has no resource %s", ClusterToken)
	}

	describeObject(component, "properties", descriptions["TalosProxmoxCluster"])
	describeObject(component, "inputProperties", descriptions["TalosProxmoxClusterArgs"])

	for token, t := range types {
		if name, ok := strings.CutPrefix(token, typePrefix); ok {
			describeObject(t.(map[string]any), "properties", descriptions[name])
		}
	}

	return nil
}

// describeObject gives obj, a resource or object type of the schema, the description doc has for it
// (none for TalosProxmoxClusterArgs, whose object is the component's), and each of its
// properties under key the one doc has for that property.
func describeObject(obj map[string]any, key string, doc typeDescriptions) {
	if doc.Description != "" {
		obj["description"] = doc.Description
	}

	props, _ := obj[key].(map[string]any)
	for name, prop := range props {
		if d := doc.Properties[name]; d != "" {
			prop.(map[string]any)["description"] = d
		}
	}
}
