package lifecycle

import (
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/redact"
)

// TestSameConfig: a configuration written with other field order or quoting (another machinery
// release) is no change; a changed value is.
func TestSameConfig(t *testing.T) {
	t.Parallel()

	a := "version: v1alpha1\nmachine:\n  type: worker\n  sysctls:\n    a: \"1\"\n    b: \"2\"\ncluster:\n  clusterName: lab\n"
	b := "cluster:\n  clusterName: 'lab'\nmachine:\n  sysctls: {b: \"2\", a: \"1\"}\n  type: worker\nversion: v1alpha1\n"
	c := "version: v1alpha1\nmachine:\n  type: worker\n  sysctls:\n    a: \"1\"\n    b: \"3\"\ncluster:\n  clusterName: lab\n"

	if !day2.SameConfig(a, b) {
		t.Error("the same configuration, reordered, is reported as a change")
	}

	if day2.SameConfig(a, c) {
		t.Error("a changed sysctl is not reported")
	}

	if day2.SameConfig("not: [yaml", "not: [yaml ") {
		t.Error("two unreadable configurations are reported equal")
	}
}

// The reboot reason names the v1alpha1 fields Talos does not change live, not the ones it does.
func TestRebootReason(t *testing.T) {
	t.Parallel()

	changes := []redact.Change{
		{Document: "v1alpha1", Fields: []redact.Field{{Path: ".machine.network.nameservers"}, {Path: ".machine.env"}, {Path: ".machine.files"}, {Path: ".cluster.network"}}},
		{Document: "ResolverConfig", Fields: []redact.Field{{Path: ".nameservers"}}},
	}

	if got, want := rebootReason("v1.11.6", changes), "Talos v1.11.6 applies a change of .machine.env, .machine.files only with a reboot"; got != want {
		t.Errorf("rebootReason = %q, want %q", got, want)
	}

	if got := rebootReason("v1.11.6", changes[1:]); got != "the node answers that it needs one" {
		t.Errorf("rebootReason of live changes only = %q", got)
	}
}
