package lifecycle

import (
	"testing"
)

// TestSameConfig: a configuration written with other field order or quoting (another machinery
// release) is no change; a changed value is.
func TestSameConfig(t *testing.T) {
	t.Parallel()

	a := "version: v1alpha1\nmachine:\n  type: worker\n  sysctls:\n    a: \"1\"\n    b: \"2\"\ncluster:\n  clusterName: lab\n"
	b := "cluster:\n  clusterName: 'lab'\nmachine:\n  sysctls: {b: \"2\", a: \"1\"}\n  type: worker\nversion: v1alpha1\n"
	c := "version: v1alpha1\nmachine:\n  type: worker\n  sysctls:\n    a: \"1\"\n    b: \"3\"\ncluster:\n  clusterName: lab\n"

	if !sameConfig(a, b) {
		t.Error("the same configuration, reordered, is reported as a change")
	}

	if sameConfig(a, c) {
		t.Error("a changed sysctl is not reported")
	}

	if sameConfig("not: [yaml", "not: [yaml ") {
		t.Error("two unreadable configurations are reported equal")
	}
}
