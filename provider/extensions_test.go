package provider

import (
	"context"
	"strings"
)

// The mocked tests have no Image Factory: their catalogue publishes every official extension name
// except those with "retired" in them, for every Talos version.
func init() {
	extensionCatalogue = func(_ context.Context, _, _ string, extensions []string) ([]string, error) {
		var missing []string

		for _, e := range extensions {
			if strings.Contains(e, "retired") {
				missing = append(missing, e)
			}
		}

		return missing, nil
	}
}
