package proxmox

import (
	"errors"
	"strings"
	"testing"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"
)

// A read that fails twice (a Proxmox under load) is asked again; one that keeps failing fails
// after four attempts, naming what was asked.
func TestInventoryReadsAreRetried(t *testing.T) {
	t.Parallel()

	calls := 0
	if got, err := retried(t.Context(), "read", func() (*int, error) {
		calls++
		if calls < 3 {
			return nil, errors.New("HTTP 500: cfs-lock timeout")
		}

		return &calls, nil
	}); err != nil || calls != 3 || *got != 3 {
		t.Errorf("a read that failed twice: %v after %d calls", err, calls)
	}

	calls = 0
	if _, err := retried(t.Context(), "proxmoxve:Cluster/getNodes", func() (*int, error) { calls++; return nil, errors.New("connection refused") }); err == nil ||
		calls != 4 || err.Error() != "proxmoxve:Cluster/getNodes: connection refused" {
		t.Errorf("a read that keeps failing: %v after %d calls", err, calls)
	}
}

// TestInstanceTags: a VM's instance is the talos-i- tag Proxmox holds for it; a node without a VM
// (new, or lost) gets a new one each time, so a re-created VM is told from the one before.
func TestInstanceTags(t *testing.T) {
	t.Parallel()

	inv := &Inventory{VMs: []vm.GetVirtualMachinesVm{
		{Name: "cp-1", VmId: 111, Tags: []string{"controlplane", "homelab", "talos", "talos-i-0a1b2c3d"}},
		{Name: "cp-2", VmId: 112, Tags: []string{"controlplane", "homelab", "talos"}},
	}}

	if got := inv.Instance("homelab", "cp-1"); got != "talos-i-0a1b2c3d" {
		t.Errorf("cp-1's instance = %s", got)
	}

	a, b := inv.Instance("homelab", "cp-3"), inv.Instance("homelab", "cp-3")
	if a == b || !strings.HasPrefix(a, "talos-i-") || len(a) != len("talos-i-")+8 {
		t.Errorf("new instances %s, %s: want two different talos-i-<8 hex>", a, b)
	}

	if got := inv.Instance("other", "cp-1"); got == "talos-i-0a1b2c3d" {
		t.Error("another cluster's VM lends its instance")
	}

	if got := (*Inventory)(nil).Instance("homelab", "cp-1"); !strings.HasPrefix(got, "talos-i-") {
		t.Errorf("without an inventory: %s", got)
	}
}
