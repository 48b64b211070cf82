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
const catalogueTimeout = 10 * time.Second

// catalogues are the official extension names by factory and Talos version, asked once per process
// (a failure too: a process that found the factory unreachable does not wait for it again).
var catalogues sync.Map // "<factory> <version>" → catalogue

type catalogue struct {
	names []string
	err   error
}

// Unpublished are the names among extensions that the Image Factory at factoryURL does not publish
// for talosVersion, from its catalogue (`GET /version/<version>/extensions/official`, through the
// factory's own client). The factory builds no image of a schematic with one of them for that
// version, which would otherwise fail only when Proxmox downloads the image.
func Unpublished(ctx context.Context, factoryURL, talosVersion string, extensions []string) ([]string, error) {
	key := factoryURL + " " + talosVersion

	cached, ok := catalogues.Load(key)
	if !ok {
		cached, _ = catalogues.LoadOrStore(key, ask(ctx, factoryURL, talosVersion))
	}

	cat := cached.(catalogue)
	if cat.err != nil {
		return nil, cat.err
	}

	var out []string

	for _, e := range extensions {
		if !slices.Contains(cat.names, e) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}

	return out, nil
}

// ask reads the factory's catalogue of talosVersion.
func ask(ctx context.Context, factoryURL, talosVersion string) catalogue {
	c, err := client.New(factoryURL)
	if err != nil {
		return catalogue{err: err}
	}

	ctx, cancel := context.WithTimeout(ctx, catalogueTimeout)
	defer cancel()

	infos, err := c.ExtensionsVersions(ctx, talosVersion)
	if err != nil {
		return catalogue{err: fmt.Errorf("asking %s for the official extensions of Talos %s: %w", factoryURL, talosVersion, err)}
	}

	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}

	return catalogue{names: names}
}
