package proxmox

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/await"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
)

// proxmoxCredentials are those of the proxmoxve provider the component's children use, for the
// VM guard's own calls: an explicit provider's inputs (read through the engine's
// pulumi:pulumi:getResource, as the SDKs do to rehydrate resource references), else the default
// provider's stack configuration (proxmoxve:endpoint, apiToken, username, password, insecure),
// else its environment variables (PROXMOX_VE_*). Empty when none reach an API.
func proxmoxCredentials(ctx *pulumi.Context, opts []pulumi.ResourceOption) pveclient.Credentials {
	if p := Provider(opts); p != nil {
		creds, err := providerCredentials(ctx, p)
		if err != nil {
			_ = ctx.Log.Debug(fmt.Sprintf("reading the proxmoxve provider's settings for the VM guard: %v", err), nil)
		}

		return creds
	}

	get := func(key, env string) string {
		if v := config.Get(ctx, "proxmoxve:"+key); v != "" {
			return v
		}

		return os.Getenv(env)
	}

	insecure, _ := strconv.ParseBool(get("insecure", "PROXMOX_VE_INSECURE"))

	return pveclient.Credentials{
		Endpoint: get("endpoint", "PROXMOX_VE_ENDPOINT"),
		APIToken: get("apiToken", "PROXMOX_VE_API_TOKEN"),
		Username: get("username", "PROXMOX_VE_USERNAME"),
		Password: get("password", "PROXMOX_VE_PASSWORD"),
		Insecure: insecure,
	}
}

func providerCredentials(ctx *pulumi.Context, p pulumi.ProviderResource) (pveclient.Credentials, error) {
	urn, ok := await.URN(ctx.Context(), p, 10*time.Second)
	if !ok {
		return pveclient.Credentials{}, fmt.Errorf("the provider's URN did not resolve")
	}

	// The output form of the invoke: the provider's state holds secrets (its apiToken), which the
	// plain form refuses.
	answer := ctx.InvokeOutput("pulumi:pulumi:getResource", map[string]any{"urn": urn}, pulumi.MapOutput{}, pulumi.InvokeOutputOptions{})

	wait, cancel := context.WithTimeout(ctx.Context(), 10*time.Second)
	defer cancel()

	m, err := await.Value[map[string]any](wait, answer)
	if err != nil {
		return pveclient.Credentials{}, fmt.Errorf("the engine did not answer pulumi:pulumi:getResource for %s: %w", urn, err)
	}

	var res struct{ State map[string]any }
	res.State, _ = m["state"].(map[string]any)

	str := func(key string) string {
		s, _ := res.State[key].(string)
		return s
	}

	insecure, ok := res.State["insecure"].(bool)
	if !ok {
		insecure, _ = strconv.ParseBool(str("insecure"))
	}

	return pveclient.Credentials{
		Endpoint: str("endpoint"), APIToken: str("apiToken"), Username: str("username"), Password: str("password"),
		Insecure: insecure,
	}, nil
}

// Endpoint is the Proxmox API the component's children reach, and whether its certificate goes
// unchecked (proxmoxve:insecure): the consumers of the component's Proxmox tokens reach it there.
func Endpoint(ctx *pulumi.Context, opts []pulumi.ResourceOption) (url string, insecure bool) {
	creds := proxmoxCredentials(ctx, opts)
	return creds.Endpoint, creds.Insecure
}
