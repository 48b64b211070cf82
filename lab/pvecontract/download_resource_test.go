package pvecontract

import (
	"testing"

	"github.com/bpg/terraform-provider-proxmox/fwprovider/config"
	fwnodes "github.com/bpg/terraform-provider-proxmox/fwprovider/nodes"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
)

func requireNoFrameworkErrors(t *testing.T, step string, diags diag.Diagnostics) {
	t.Helper()

	for _, d := range diags {
		if d.Severity() == diag.SeverityError {
			t.Fatalf("%s: %s: %s", step, d.Summary(), d.Detail())
		}

		t.Logf("%s: warning: %s: %s", step, d.Summary(), d.Detail())
	}
}

// TestDownloadFileResourceLifecycle runs the provider's own
// proxmox_virtual_environment_download_file resource (create, read, delete) with
// content_type "import", as the component uses it, against the fake.
func TestDownloadFileResourceLifecycle(t *testing.T) {
	t.Parallel()

	l := newLab(t, pvefake.Options{})
	r := fwnodes.NewDownloadFileResource()
	ctx := l.ctx

	var cfgResp resource.ConfigureResponse
	r.(resource.ResourceWithConfigure).Configure(ctx, resource.ConfigureRequest{ProviderData: config.Resource{Client: l.client}}, &cfgResp)
	requireNoFrameworkErrors(t, "configure", cfgResp.Diagnostics)

	var schemaResp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &schemaResp)

	objType := schemaResp.Schema.Type().TerraformType(ctx).(tftypes.Object)
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }

	plan := map[string]tftypes.Value{}
	for name, typ := range objType.AttributeTypes {
		plan[name] = tftypes.NewValue(typ, nil)
	}

	// what the planner produces from the component's inputs and the schema defaults
	plan["id"] = tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	plan["size"] = tftypes.NewValue(tftypes.Number, tftypes.UnknownValue)
	plan["content_type"] = str("import")
	plan["datastore_id"] = str("local")
	plan["node_name"] = str("pve1")
	plan["url"] = str(l.images.URL + imagePath)
	plan["file_name"] = str("talos-v1.11.5-nocloud-amd64.qcow2")
	plan["upload_timeout"] = tftypes.NewValue(tftypes.Number, 600)
	plan["verify"] = tftypes.NewValue(tftypes.Bool, true)
	plan["overwrite"] = tftypes.NewValue(tftypes.Bool, true)
	plan["overwrite_unmanaged"] = tftypes.NewValue(tftypes.Bool, false)

	createResp := resource.CreateResponse{State: tfsdk.State{Schema: schemaResp.Schema, Raw: tftypes.NewValue(objType, nil)}}
	r.Create(ctx, resource.CreateRequest{Plan: tfsdk.Plan{Schema: schemaResp.Schema, Raw: tftypes.NewValue(objType, plan)}}, &createResp)
	requireNoFrameworkErrors(t, "create", createResp.Diagnostics)

	var id string
	var size int64

	requireNoFrameworkErrors(t, "state", createResp.State.GetAttribute(ctx, pathOf("id"), &id))
	requireNoFrameworkErrors(t, "state", createResp.State.GetAttribute(ctx, pathOf("size"), &size))

	if id != "local:import/talos-v1.11.5-nocloud-amd64.qcow2" || size != 4096 {
		t.Fatalf("id %q, size %d", id, size)
	}

	readResp := resource.ReadResponse{State: createResp.State}
	r.Read(ctx, resource.ReadRequest{State: createResp.State}, &readResp)
	requireNoFrameworkErrors(t, "read", readResp.Diagnostics)

	if readResp.State.Raw.IsNull() {
		t.Fatal("read dropped the file")
	}

	deleteResp := resource.DeleteResponse{State: readResp.State}
	r.Delete(ctx, resource.DeleteRequest{State: readResp.State}, &deleteResp)
	requireNoFrameworkErrors(t, "delete", deleteResp.Diagnostics)

	if vols := l.fake.Volumes("pve1", "local"); len(vols) != 0 {
		t.Fatalf("volumes left: %+v", vols)
	}

	if unknown := unknownCalls(l.fake); len(unknown) > 0 {
		t.Fatalf("calls the fake does not serve: %v", unknown)
	}

	t.Logf("calls: %v", l.fake.Calls())
}

func pathOf(name string) path.Path { return path.Root(name) }
