package wire

import (
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

func TestLeaderLast(t *testing.T) {
	cps := []spec.Node{{Name: "cp-1"}, {Name: "cp-2"}, {Name: "cp-3"}}

	for leader, want := range map[string]string{"cp-1": "cp-2 cp-3 cp-1", "cp-2": "cp-1 cp-3 cp-2", "cp-3": "cp-1 cp-2 cp-3", "gone": "cp-1 cp-2 cp-3"} {
		var got []string
		for _, n := range leaderLast(cps, leader) {
			got = append(got, n.Name)
		}

		if strings.Join(got, " ") != want {
			t.Errorf("leader %s: order %v, want %s", leader, got, want)
		}
	}

	if cps[0].Name != "cp-1" || cps[2].Name != "cp-3" {
		t.Errorf("leaderLast changed its argument: %v", cps)
	}
}
