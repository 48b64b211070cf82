package imagefactory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/siderolabs/image-factory/pkg/client"
)

// catalogueTimeout bounds one question to the factory: an unreachable factory makes the check a
// warning, never a long wait.
const catalogueTimeout = 15 * time.Second

// catalogues are the official extension names by factory and Talos version, asked once per process.
var catalogues sync.Map // "<factory> <version>" → []string

// Unpublished are the names among extensions that the Image Factory at factoryURL does not publish
// for talosVersion, from its catalogue (`GET /version/<version>/extensions/official`, through the
// factory's own client). The factory builds no image of a schematic with one of them for that
// version, which would otherwise fail only when Proxmox downloads the image.
func Unpublished(ctx context.Context, factoryURL, talosVersion string, extensions []string) ([]string, error) {
	key := factoryURL + " " + talosVersion

	names, ok := catalogues.Load(key)
	if !ok {
		c, err := client.New(factoryURL)
		if err != nil {
			return nil, err
		}

		ctx, cancel := context.WithTimeout(ctx, catalogueTimeout)
		defer cancel()

		infos, err := c.ExtensionsVersions(ctx, talosVersion)
		if err != nil {
			return nil, fmt.Errorf("asking %s for the official extensions of Talos %s: %w", factoryURL, talosVersion, err)
		}

		var list []string
		for _, i := range infos {
			list = append(list, i.Name)
		}

		names, _ = catalogues.LoadOrStore(key, list)
	}

	var out []string

	for _, e := range extensions {
		if !slices.Contains(names.([]string), e) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}

	return out, nil
}
