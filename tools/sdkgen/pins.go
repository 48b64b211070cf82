package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// Versions the SDKs are built and checked with. pulumiSDKVersion is the Pulumi SDK of the
// provider and of the pinned CLI; a test keeps it equal to this module's github.com/pulumi/pulumi
// requirements and to sdk-go.mod's.
const (
	pulumiSDKVersion  = "3.259.0"
	typescriptVersion = "5.9.3"
	nodeTypesVersion  = "20.19.43"
)

// languagePins are added to schema.json's language section before generating: the generators'
// defaults (an old minimum Pulumi SDK, a TypeScript range) would let each SDK drift to whatever
// the registries serve on the day. The Pulumi SDK is a lower bound, not an exact pin, so a
// program may use a newer one without installing two copies of it.
var languagePins = map[string]map[string]any{
	"nodejs": {
		"dependencies":      map[string]any{"@pulumi/pulumi": "^" + pulumiSDKVersion},
		"devDependencies":   map[string]any{"@types/node": nodeTypesVersion},
		"typescriptVersion": typescriptVersion,
	},
	"python": {
		"requires": map[string]any{"pulumi": ">=" + pulumiSDKVersion + ",<4.0.0"},
	},
}

// The Go SDK's go.mod and go.sum, copied verbatim to sdk/go: the Go generator does not write
// them. To change them, generate, run `go get github.com/pulumi/pulumi/sdk/v3@v<version> && go mod
// tidy` in sdk/go, and copy both files back here.
var (
	//go:embed sdk-go.mod
	goSDKModFile []byte
	//go:embed sdk-go.sum
	goSDKSumFile []byte
)

// pinLanguages adds languagePins to spec's language section. A setting schema.json already has
// must equal the pin: two sources disagreeing on a version is an error, not a silent override.
func pinLanguages(spec *schema.PackageSpec) error {
	if spec.Language == nil {
		spec.Language = map[string]schema.RawMessage{}
	}
	for _, lang := range slices.Sorted(maps.Keys(languagePins)) {
		settings := map[string]any{}
		if raw := spec.Language[lang]; len(raw) > 0 {
			if err := json.Unmarshal(raw, &settings); err != nil {
				return fmt.Errorf("parsing language.%s: %w", lang, err)
			}
		}
		if err := mergePins(settings, languagePins[lang], "language."+lang); err != nil {
			return err
		}
		raw, err := json.Marshal(settings)
		if err != nil {
			return fmt.Errorf("encoding language.%s: %w", lang, err)
		}
		spec.Language[lang] = raw
	}
	return nil
}

// mergePins copies pins into settings, descending into objects; at is the path of settings in
// the schema, for error messages.
func mergePins(settings, pins map[string]any, at string) error {
	for _, key := range slices.Sorted(maps.Keys(pins)) {
		pin, have := pins[key], settings[key]
		if have == nil {
			settings[key] = pin
			continue
		}
		pinObject, pinIsObject := pin.(map[string]any)
		haveObject, haveIsObject := have.(map[string]any)
		if pinIsObject && haveIsObject {
			if err := mergePins(haveObject, pinObject, at+"."+key); err != nil {
				return err
			}
			continue
		}
		if !reflect.DeepEqual(have, pin) {
			return fmt.Errorf("schema.json sets %s.%s to %v, sdkgen pins %v: keep one of them", at, key, have, pin)
		}
	}
	return nil
}
