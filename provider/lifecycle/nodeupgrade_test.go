package lifecycle

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// Diff shows an update exactly when the node would reboot, and refuses at preview what Talos
// refuses.
func TestNodeUpgradeDiff(t *testing.T) {
	t.Parallel()

	ran := NodeUpgradeState{
		NodeUpgradeArgs: NodeUpgradeArgs{NodeRef: NodeRef{Node: "cp-1"}, ClusterAccess: ClusterAccess{Talosconfig: "old"}, TalosVersion: "v1.11.5", SchematicId: "aaa", InstallerImage: "f/installer/aaa:v1.11.5"},
		RunningVersion:  "v1.11.5", RunningSchematicId: "aaa",
	}

	testDiff(t, (&NodeUpgrade{}).Diff, ran, ran.NodeUpgradeArgs, []diffCase[NodeUpgradeArgs]{
		{"nothing", func(*NodeUpgradeArgs) {}, false, ""},
		{"credentials and policy only", func(a *NodeUpgradeArgs) { a.Talosconfig, a.Drain, a.Timeout = "new", true, "1m" }, false, ""},
		{"patch version", func(a *NodeUpgradeArgs) { a.TalosVersion, a.InstallerImage = "v1.11.6", "f/installer/aaa:v1.11.6" }, true, ""},
		{"schematic", func(a *NodeUpgradeArgs) { a.SchematicId, a.InstallerImage = "bbb", "f/installer/bbb:v1.11.5" }, true, ""},
		{"downgrade", func(a *NodeUpgradeArgs) { a.TalosVersion = "v1.11.4" }, false, "allowDowngrade"},
		{"allowed downgrade", func(a *NodeUpgradeArgs) { a.TalosVersion, a.AllowDowngrade = "v1.11.4", true }, true, ""},
		{"two minors at once", func(a *NodeUpgradeArgs) { a.TalosVersion = "v1.14.1" }, false, "intermediate minor"},
	}, func(t *testing.T, tc diffCase[NodeUpgradeArgs], resp infer.DiffResponse, err error) {
		switch {
		case tc.wantErr != "" && !strings.Contains(err.Error(), "node cp-1"):
			t.Fatalf("err = %v, want one naming node cp-1", err)
		case tc.update && resp.DetailedDiff["installerImage"].Kind != "update":
			t.Fatalf("detailed diff = %v, want an update of installerImage", resp.DetailedDiff)
		}
	})
}

// A node kept under its name never leaves, whatever its address does (a replaced VM's member and
// Node belong to the new machine); only names that disappear do.
func TestMembershipLeaving(t *testing.T) {
	t.Parallel()

	old := MembershipArgs{Nodes: map[string]MemberNode{
		"cp-1": {Address: "10.0.0.11", ControlPlane: true}, "cp-2": {Address: "10.0.0.12", ControlPlane: true}, "w-1": {Address: "10.0.0.21"},
	}}
	new := MembershipArgs{Nodes: map[string]MemberNode{
		"cp-1": {Address: "10.0.0.11", ControlPlane: true}, "cp-2": {Address: "", ControlPlane: true},
	}}

	if got := leaving(old, new); len(got) != 1 || got[0] != "w-1" {
		t.Fatalf("leaving = %v, want [w-1]", got)
	}
}
