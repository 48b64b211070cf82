package proxmox

import (
	"errors"
	"testing"
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
