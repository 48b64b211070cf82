package provider

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

func servedSchema(t *testing.T) map[string]any {
	t.Helper()

	b, err := Schema(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}

	return s
}

// TestSchemaIsCurrent fails when the checked-in schema.json differs from what the provider
// serves.
func TestSchemaIsCurrent(t *testing.T) {
	t.Parallel()

	raw, err := os.ReadFile("../schema.json")
	if err != nil {
		t.Fatalf("%v: run `make schema`", err)
	}

	var checkedIn map[string]any
	if err := json.Unmarshal(raw, &checkedIn); err != nil {
		t.Fatal(err)
	}

	if !reflect.DeepEqual(checkedIn, servedSchema(t)) {
		t.Fatal("schema.json is stale: run `make schema` (or `make codegen`) and commit the result")
	}
}

func TestSchemaDescribesEverything(t *testing.T) {
	t.Parallel()

	s := servedSchema(t)
	check := func(where string, obj map[string]any, key string) {
		props, _ := obj[key].(map[string]any)
		for name, p := range props {
			d, _ := p.(map[string]any)["description"].(string)
			if len(strings.Fields(d)) < 3 {
				t.Errorf("%s.%s has no useful description: %q", where, name, d)
			}
		}
	}

	r := s["resources"].(map[string]any)[ClusterToken].(map[string]any)
	check(ClusterToken+" input", r, "inputProperties")
	check(ClusterToken+" output", r, "properties")

	for token, typ := range s["types"].(map[string]any) {
		if d, _ := typ.(map[string]any)["description"].(string); d == "" {
			t.Errorf("type %s has no description", token)
		}
		check(token, typ.(map[string]any), "properties")
	}
}

// TestDescriptionsMatchSchema fails when descriptions.yaml leaves out a type or property of the
// schema's package types, or describes one the schema does not have, or a description there is
// not the one served.
func TestDescriptionsMatchSchema(t *testing.T) {
	t.Parallel()

	s := servedSchema(t)
	component := s["resources"].(map[string]any)[ClusterToken].(map[string]any)
	served := map[string]map[string]any{
		"TalosProxmoxCluster":     component,
		"TalosProxmoxClusterArgs": {"properties": component["inputProperties"]},
	}

	for token, typ := range s["types"].(map[string]any) {
		if name, ok := strings.CutPrefix(token, "talos-proxmox:index:"); ok {
			served[name] = typ.(map[string]any)
		}
	}

	for name, want := range served {
		got, ok := descriptions[name]
		if !ok {
			t.Errorf("descriptions.yaml has no %s", name)

			continue
		}

		if d, _ := want["description"].(string); got.Description != d && name != "TalosProxmoxClusterArgs" {
			t.Errorf("%s: served description %q, descriptions.yaml %q", name, d, got.Description)
		}

		props, _ := want["properties"].(map[string]any)
		for prop, p := range props {
			d, _ := p.(map[string]any)["description"].(string)
			switch {
			case got.Properties[prop] == "":
				t.Errorf("descriptions.yaml does not describe %s.%s", name, prop)
			case got.Properties[prop] != d:
				t.Errorf("%s.%s: served description %q, descriptions.yaml %q", name, prop, d, got.Properties[prop])
			}
		}

		for prop := range got.Properties {
			if _, ok := props[prop]; !ok {
				t.Errorf("descriptions.yaml describes %s.%s, which the schema does not have", name, prop)
			}
		}
	}

	for name := range descriptions {
		if _, ok := served[name]; !ok {
			t.Errorf("descriptions.yaml describes %s, which the schema does not have", name)
		}
	}
}

func TestSchemaPlainMatchesGoFields(t *testing.T) {
	t.Parallel()

	s := servedSchema(t)
	inputs := s["resources"].(map[string]any)[ClusterToken].(map[string]any)["inputProperties"].(map[string]any)
	types := s["types"].(map[string]any)

	prop := func(path string) map[string]any {
		parts := strings.Split(path, ".")
		var props map[string]any
		if parts[0] == "cluster" {
			props = inputs
		} else {
			props = types["talos-proxmox:index:"+parts[0]].(map[string]any)["properties"].(map[string]any)
		}

		return props[parts[1]].(map[string]any)
	}

	plain := []string{"cluster.clusterName", "cluster.nodes", "cluster.network", "cluster.inlineManifests",
		"cluster.extraManifests", "Node.role", "Node.cpu", "Node.dataDisks", "Node.labels", "DataDisk.mountPath",
		"Network.nameservers", "Image.extensions", "InlineManifest.name"}
	inputy := []string{"cluster.configPatches", "cluster.controlPlaneConfigPatches", "cluster.workerConfigPatches",
		"Node.configPatches", "InlineManifest.contents"}

	for _, p := range plain {
		if prop(p)["plain"] != true {
			t.Errorf("%s must be plain in the schema (its Go field is plain)", p)
		}
	}

	for _, p := range inputy {
		if prop(p)["plain"] == true {
			t.Errorf("%s must accept outputs and secrets", p)
		}

		if items, ok := prop(p)["items"].(map[string]any); ok && items["plain"] == true {
			t.Errorf("%s must accept an output or secret per element", p)
		}
	}

	if ap := prop("cluster.nodes")["additionalProperties"].(map[string]any); ap["plain"] != true {
		t.Error("nodes' values must be plain")
	}

	for name, p := range inputs {
		if _, ok := p.(map[string]any)["default"]; ok {
			t.Errorf("%s declares a schema default; components get none applied at runtime, so defaults live in code", name)
		}
	}
}

// TestDocumentedDefaultsMatchCode keeps the descriptions honest about spec.Defaults.
func TestDocumentedDefaultsMatchCode(t *testing.T) {
	t.Parallel()

	s := servedSchema(t)
	types := s["types"].(map[string]any)
	desc := func(typ, prop string) string {
		return types["talos-proxmox:index:"+typ].(map[string]any)["properties"].(map[string]any)[prop].(map[string]any)["description"].(string)
	}

	d := spec.Defaults
	want := map[[2]string]string{
		{"NodeDefaults", "cpu"}:          fmt.Sprintf("Default: %d.", d.CPU),
		{"NodeDefaults", "memoryMib"}:    fmt.Sprintf("Default: %d.", d.MemoryMiB),
		{"NodeDefaults", "diskSizeGib"}:  fmt.Sprintf("Default: %d.", d.DiskSizeGiB),
		{"NodeDefaults", "datastoreId"}:  "Default: `" + d.DatastoreID + "`.",
		{"NodeDefaults", "cpuType"}:      "Default: `" + d.CPUType + "`",
		{"NodeDefaults", "vmMachine"}:    "Default: `" + d.VMMachine + "`.",
		{"NodeDefaults", "bios"}:         "`" + d.BIOS + "` (default)",
		{"NodeDefaults", "scsiHardware"}: "Default: `" + d.SCSI + "`.",
		{"Network", "prefixLength"}:      fmt.Sprintf("Default: %d.", d.PrefixLength),
		{"Network", "bridge"}:            "Default: `" + d.Bridge + "`.",
		{"Network", "podSubnets"}:        "Default: `" + d.PodSubnets[0] + "`.",
		{"Network", "serviceSubnets"}:    "Default: `" + d.ServiceSubnets[0] + "`.",
		{"Network", "dnsDomain"}:         "Default: `" + d.DNSDomain + "`.",
		{"Image", "factoryUrl"}:          "Default: `" + d.FactoryURL + "`.",
		{"Image", "extensions"}:          "Default: `[\"" + d.Extensions[0] + "\"]`.",
		{"Image", "platform"}:            "`" + d.Platform + "` (default",
		{"Image", "arch"}:                "`" + d.Arch + "` (default)",
		{"Image", "datastoreId"}:         "Default: `" + d.ImageDatastoreID + "`.",
		{"Image", "contentType"}:         "`" + string(d.ContentType) + "` (default)",
		{"Node", "installDisk"}:          "Default: `" + d.InstallDisk + "`",
	}

	for k, w := range want {
		if got := desc(k[0], k[1]); !strings.Contains(got, w) {
			t.Errorf("%s.%s description %q does not state %q", k[0], k[1], got, w)
		}
	}

	for minor, tm := range spec.SupportedTalos {
		kv := inputs(s)["kubernetesVersion"].(map[string]any)["description"].(string)
		if !strings.Contains(kv, tm.DefaultKubernetes+" for Talos "+minor) {
			t.Errorf("kubernetesVersion description does not state %s for Talos %s: %q", tm.DefaultKubernetes, minor, kv)
		}
	}
}

func inputs(s map[string]any) map[string]any {
	return s["resources"].(map[string]any)[ClusterToken].(map[string]any)["inputProperties"].(map[string]any)
}
