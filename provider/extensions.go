package provider

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/imagefactory"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// CatalogueCheckEnv set to "off" skips the catalogue check: for programs tested under mocks,
// with no Image Factory to ask, and sites whose factory serves no catalogue.
const CatalogueCheckEnv = "TALOS_PROXMOX_CATALOGUE_CHECK"

// extensionCatalogue answers which of a list of extensions the Image Factory does not publish for
// a Talos version (imagefactory.Unpublished; the mocked tests give their own).
var extensionCatalogue = imagefactory.Unpublished

// checkExtensions asks the Image Factory's catalogue whether it publishes every extension of the
// nodes' images for the cluster's Talos version: a problem per property that names one it does not
// (the factory would build no image of it, and the `up` would fail at the download), and a warning
// instead when the factory cannot be asked.
func checkExtensions(ctx context.Context, c *spec.Cluster) (problems []error, warning string) {
	if c == nil || c.TalosVersion == "" || os.Getenv(CatalogueCheckEnv) == "off" {
		return nil, ""
	}

	paths := map[string][]string{} // extension → the properties that put it in an image

	for _, img := range c.Images() {
		for e, path := range img.ExtensionPaths {
			if !slices.Contains(paths[e], path) {
				paths[e] = append(paths[e], path)
			}
		}
	}

	if len(paths) == 0 {
		return nil, ""
	}

	missing, err := extensionCatalogue(ctx, c.Image.FactoryURL, c.TalosVersion, slices.Sorted(maps.Keys(paths)))
	if err != nil {
		return nil, fmt.Sprintf("the extensions of the nodes' images were not checked against the Image Factory's catalogue: %v", err)
	}

	for _, e := range missing {
		for _, path := range slices.Sorted(slices.Values(paths[e])) {
			problems = append(problems, fmt.Errorf("%s: %q is not an official extension of Talos %s at the Image Factory (%s), which "+
				"builds no image with it; remove it, or use a Talos version that has it (the factory's catalogue: "+
				"%s/version/%s/extensions/official)", path, e, c.TalosVersion, c.Image.FactoryURL, c.Image.FactoryURL, c.TalosVersion))
		}
	}

	return problems, ""
}
