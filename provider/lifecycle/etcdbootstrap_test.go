package lifecycle

import (
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// TestEtcdBootstrapDiff: the bootstrap starts again only when a control plane it knew has a new
// VM instance (a VM lost and created again); control planes added or removed, and any other
// input, change nothing.
func TestEtcdBootstrapDiff(t *testing.T) {
	t.Parallel()

	was := EtcdBootstrapArgs{Node: "cp-1", Address: "10.0.0.11", Instances: map[string]string{"cp-1": "talos-i-1", "cp-2": "talos-i-2"}}

	for _, tc := range []struct {
		name      string
		instances map[string]string
		node      string
		replace   bool
	}{
		{"unchanged", map[string]string{"cp-1": "talos-i-1", "cp-2": "talos-i-2"}, "cp-1", false},
		{"cp-1 removed, cp-2 bootstraps now", map[string]string{"cp-2": "talos-i-2"}, "cp-2", false},
		{"a control plane added", map[string]string{"cp-1": "talos-i-1", "cp-2": "talos-i-2", "cp-3": "talos-i-3"}, "cp-1", false},
		{"cp-2's VM lost and created again", map[string]string{"cp-1": "talos-i-1", "cp-2": "talos-i-9"}, "cp-1", true},
		{"every VM lost", map[string]string{"cp-1": "talos-i-7", "cp-2": "talos-i-8"}, "cp-1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			in := was
			in.Instances, in.Node = tc.instances, tc.node

			resp, err := (&EtcdBootstrap{}).Diff(t.Context(), infer.DiffRequest[EtcdBootstrapArgs, EtcdBootstrapState]{
				Inputs: in, State: EtcdBootstrapState{EtcdBootstrapArgs: was},
			})
			if err != nil {
				t.Fatal(err)
			}

			if replaces := resp.HasChanges && len(resp.DetailedDiff) > 0; replaces != tc.replace {
				t.Errorf("replace = %v (%+v), want %v", replaces, resp, tc.replace)
			}
		})
	}
}
