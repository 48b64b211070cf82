package proxmoxve

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/pulumi/pulumi-terraform-bridge/v3/unstable/metadata"
)

// The embedded schema must be the published file in lab/schemas, byte for byte.
func TestSchemaIsThePublishedFile(t *testing.T) {
	t.Parallel()

	published, err := os.ReadFile(filepath.Join("..", "schemas", "proxmoxve-v7.13.0.schema.json"))
	if err != nil {
		t.Fatal(err)
	}

	if !bytes.Equal(Schema, published) {
		t.Fatalf("embedded schema (%d bytes) differs from lab/schemas/proxmoxve-v7.13.0.schema.json (%d bytes)",
			len(Schema), len(published))
	}
}

// Info muxes both halves and dispatches each mapped token to the half that defines it: the VM to
// bpg's SDKv2 provider, the download file to its plugin-framework provider.
func TestInfoDispatchesEachTokenToItsHalf(t *testing.T) {
	t.Parallel()

	info, err := Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	if info.Version != Version {
		t.Fatalf("version %q, want %q", info.Version, Version)
	}

	table, found, err := metadata.Get[struct {
		Resources map[string]int `json:"resources"`
	}](info.GetMetadata(), "mux")
	if err != nil || !found {
		t.Fatalf("no mux dispatch table in metadata (found %v, err %v)", found, err)
	}

	// 0 is bpg's SDKv2 half, 1 its plugin-framework half.
	want := map[string]int{VirtualMachineToken: 0, FileToken: 1, RoleToken: 0, UserToken: 0, APITokenToken: 1, ACLToken: 1}
	if !maps.Equal(table.Resources, want) {
		t.Fatalf("dispatch table resources %v, want %v", table.Resources, want)
	}

	var published struct {
		Resources map[string]json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(Schema, &published); err != nil {
		t.Fatal(err)
	}

	for tok := range want {
		if _, ok := published.Resources[tok]; !ok {
			t.Errorf("token %s is not in the published schema", tok)
		}
	}
}
