package lifecycle

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
)

func TestClusterHealthDiff(t *testing.T) {
	t.Parallel()

	old := ClusterHealthState{ClusterHealthArgs{Revision: "r1", KubernetesVersion: "v1.33.5", Timeout: "10m"}}

	for _, tc := range []struct {
		name    string
		change  func(*ClusterHealthArgs)
		update  bool
		wantErr string
	}{
		{"nothing", func(*ClusterHealthArgs) {}, false, ""},
		{"a new revision runs the gate", func(a *ClusterHealthArgs) { a.Revision = "r2" }, true, ""},
		{"one minor up", func(a *ClusterHealthArgs) { a.KubernetesVersion = "v1.34.1" }, true, ""},
	} {
		in := old.ClusterHealthArgs
		tc.change(&in)

		resp, err := (&ClusterHealth{}).Diff(t.Context(), infer.DiffRequest[ClusterHealthArgs, ClusterHealthState]{Inputs: in, State: old})

		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case resp.HasChanges != tc.update:
			t.Errorf("%s: HasChanges = %v, want %v", tc.name, resp.HasChanges, tc.update)
		}
	}
}

// The Kubernetes upgrade refuses at preview (Diff) a step Kubernetes does not support, and shows
// an update only when the version changes.
func TestKubernetesUpgradeDiff(t *testing.T) {
	t.Parallel()

	old := KubernetesUpgradeState{KubernetesUpgradeArgs{KubernetesVersion: "v1.33.5", Timeout: "10m"}}

	for _, tc := range []struct {
		name    string
		change  func(*KubernetesUpgradeArgs)
		update  bool
		wantErr string
	}{
		{"nothing", func(*KubernetesUpgradeArgs) {}, false, ""},
		{"another node list changes nothing on the nodes", func(a *KubernetesUpgradeArgs) { a.Workers = map[string]string{"w": "10.0.0.9"} }, false, ""},
		{"one minor up", func(a *KubernetesUpgradeArgs) { a.KubernetesVersion = "v1.34.1" }, true, ""},
		{"two minors up", func(a *KubernetesUpgradeArgs) { a.KubernetesVersion = "v1.35.0" }, false, "skips v1.34"},
		{"a minor down", func(a *KubernetesUpgradeArgs) { a.KubernetesVersion = "v1.32.0" }, false, "does not support downgrades"},
	} {
		in := old.KubernetesUpgradeArgs
		tc.change(&in)

		resp, err := (&KubernetesUpgrade{}).Diff(t.Context(), infer.DiffRequest[KubernetesUpgradeArgs, KubernetesUpgradeState]{Inputs: in, State: old})

		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case resp.HasChanges != tc.update:
			t.Errorf("%s: HasChanges = %v, want %v", tc.name, resp.HasChanges, tc.update)
		}
	}
}
