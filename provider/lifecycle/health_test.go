package lifecycle

import "testing"

func TestClusterHealthDiff(t *testing.T) {
	t.Parallel()

	old := ClusterHealthState{Revision: "r1", KubernetesVersion: "v1.33.5", Timeout: "10m"}

	testDiff(t, (&ClusterHealth{}).Diff, old, old, []diffCase[ClusterHealthArgs]{
		{"nothing", func(*ClusterHealthArgs) {}, false, ""},
		{"a new revision runs the gate", func(a *ClusterHealthArgs) { a.Revision = "r2" }, true, ""},
		{"one minor up", func(a *ClusterHealthArgs) { a.KubernetesVersion = "v1.34.1" }, true, ""},
	}, nil)
}

// The Kubernetes upgrade refuses at preview (Diff) a step Kubernetes does not support, and shows
// an update only when the version changes.
func TestKubernetesUpgradeDiff(t *testing.T) {
	t.Parallel()

	old := KubernetesUpgradeState{KubernetesVersion: "v1.33.5", Timeout: "10m"}

	testDiff(t, (&KubernetesUpgrade{}).Diff, old, old, []diffCase[KubernetesUpgradeArgs]{
		{"nothing", func(*KubernetesUpgradeArgs) {}, false, ""},
		{"another node list changes nothing on the nodes", func(a *KubernetesUpgradeArgs) { a.Workers = map[string]string{"w": "10.0.0.9"} }, false, ""},
		{"one minor up", func(a *KubernetesUpgradeArgs) { a.KubernetesVersion = "v1.34.1" }, true, ""},
		{"two minors up", func(a *KubernetesUpgradeArgs) { a.KubernetesVersion = "v1.35.0" }, false, "skips v1.34"},
		{"a minor down", func(a *KubernetesUpgradeArgs) { a.KubernetesVersion = "v1.32.0" }, false, "does not support downgrades"},
	}, nil)
}
