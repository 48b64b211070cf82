package provider

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

func TestPlainInputsNameTheProperty(t *testing.T) {
	t.Parallel()

	cases := []struct {
		name   string
		mutate func(property.Map) property.Map
		path   string
	}{
		{"secret cluster name", func(m property.Map) property.Map {
			return m.Set("clusterName", m.Get("clusterName").WithSecret(true))
		}, "clusterName: is a secret"},
		{"unknown node address", func(m property.Map) property.Map {
			nodes := m.Get("nodes").AsMap()
			cp := nodes.Get("cp-1").AsMap().Set("ip", property.New(property.Computed))
			return m.Set("nodes", property.New(nodes.Set("cp-1", property.New(cp))))
		}, "nodes.cp-1.ip: is unknown"},
		{"a string where a number goes", func(m property.Map) property.Map {
			nodes := m.Get("nodes").AsMap()
			cp := nodes.Get("cp-1").AsMap().Set("cpu", property.New("2"))
			return m.Set("nodes", property.New(nodes.Set("cp-1", property.New(cp))))
		}, `nodes.cp-1.cpu: expected a whole number, got the string "2"`},
		{"a fraction for a VM id", func(m property.Map) property.Map {
			nodes := m.Get("nodes").AsMap()
			cp := nodes.Get("cp-1").AsMap().Set("vmId", property.New(100.5))
			return m.Set("nodes", property.New(nodes.Set("cp-1", property.New(cp))))
		}, "nodes.cp-1.vmId: expected a whole number, got the number 100.5"},
		{"secret deep in chart values", func(m property.Map) property.Map {
			values := property.NewMap(map[string]property.Value{
				"hubble": property.New(map[string]property.Value{"ui": property.New(property.NewMap(map[string]property.Value{
					"password": property.New("hunter2").WithSecret(true),
				}))}),
			})
			return m.Set("cilium", property.New(map[string]property.Value{"values": property.New(values)}))
		}, "cilium.values.hubble.ui.password: is a secret"},
		{"output of another resource", func(m property.Map) property.Map {
			return m.Set("vip", m.Get("vip").WithDependencies([]resource.URN{"urn:pulumi:stack::project::random:index:RandomPet::pet"}))
		}, "vip: is an output of urn:pulumi:stack::project::random:index:RandomPet::pet"},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			r := &recorder{}
			_, err := construct(t, r, "homelab", tc.mutate(inputsFromJSON(t, homelabJSON)))
			if err == nil || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("error = %v, want one naming %q", err, tc.path)
			}

			if len(r.custom()) != 0 {
				t.Errorf("registered %d resources", len(r.custom()))
			}
		})
	}
}

func TestSecretPatchesAreAccepted(t *testing.T) {
	t.Parallel()

	in := inputsFromJSON(t, homelabJSON)
	in = in.Set("configPatches", in.Get("configPatches").WithSecret(true))

	r := &recorder{}
	if _, err := construct(t, r, "homelab", in); err != nil {
		t.Fatal(err)
	}

	for _, apply := range r.ofType("talos:machine/configurationApply:ConfigurationApply") {
		if !apply.Inputs.Get("machineConfigurationInput").Secret() {
			t.Errorf("%s: configuration from a secret patch is not secret", apply.Name)
		}
	}
}
