package provider

import (
	_ "embed"
	"fmt"
	"reflect"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
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

// describeType gives the struct s and each of its fields with a `pulumi` tag their descriptions from
// descriptions.yaml; every Annotate of the package is this one call. A property the file leaves
// out stays undescribed, which TestDescriptionsMatchSchema reports.
func describeType[T any](an infer.Annotator, s *T) {
	doc := descriptions[reflect.TypeFor[T]().Name()]
	if doc.Description != "" {
		an.Describe(s, doc.Description)
	}

	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		tag, ok := v.Type().Field(i).Tag.Lookup("pulumi")
		if d := doc.Properties[strings.Split(tag, ",")[0]]; ok && d != "" {
			an.Describe(v.Field(i).Addr().Interface(), d)
		}
	}
}
