package proxmox

import (
	"testing"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

type echoMocks struct{}

func (echoMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return args.Name + "-id", args.Inputs, nil
}

func (echoMocks) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// The VM guard reads an explicit proxmoxve provider's settings through the engine's
// pulumi:pulumi:getResource, secrets included; without one, the stack configuration.
func TestProxmoxCredentials(t *testing.T) {
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		prov, err := proxmoxve.NewProvider(ctx, "pve", &proxmoxve.ProviderArgs{
			Endpoint: pulumi.String("https://pve1:8006/"),
			ApiToken: pulumi.ToSecret(pulumi.String("root@pam!t=secret")).(pulumi.StringOutput),
			Insecure: pulumi.Bool(true),
		})
		if err != nil {
			return err
		}

		got := proxmoxCredentials(ctx, []pulumi.ResourceOption{pulumi.Providers(prov)})
		if got.Endpoint != "https://pve1:8006/" || got.APIToken != "root@pam!t=secret" || !got.Insecure || !got.Usable() {
			t.Errorf("explicit provider: %+v", got)
		}

		def := proxmoxCredentials(ctx, nil)
		if def.Endpoint != "https://cfg:8006/" || def.APIToken != "cfg!t=s" || def.Insecure {
			t.Errorf("stack configuration: %+v", def)
		}

		return nil
	}, pulumi.WithMocks("proj", "stack", echoMocks{}), func(info *pulumi.RunInfo) {
		info.Config = map[string]string{"proxmoxve:endpoint": "https://cfg:8006/", "proxmoxve:apiToken": "cfg!t=s"}
	})
	if err != nil {
		t.Fatal(err)
	}
}
