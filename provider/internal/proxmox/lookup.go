package proxmox

import (
	"context"
	"slices"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/await"
)

// Provider is the proxmoxve provider passed to the component, which its children use;
// nil for the default provider.
func Provider(opts []pulumi.ResourceOption) pulumi.ProviderResource {
	ro, err := pulumi.NewResourceOptions(opts...)
	if err != nil {
		return nil
	}

	candidates := slices.Clone(ro.Providers)
	if ro.Provider != nil {
		candidates = append(candidates, ro.Provider)
	}

	for _, p := range candidates {
		if u, ok := await.URN(context.Background(), p, 5*time.Second); ok && resource.URN(u).Type() == "pulumi:providers:proxmoxve" {
			return p
		}
	}

	return nil
}
