package talosemu

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Faults are failures a test turns on for one node: at start (Options.Faults) or at any time
// (Node.SetFaults).
type Faults struct {
	// UpgradeError makes upgrades fail before anything changes: the legacy Upgrade API answers an
	// error and LifecycleService.Upgrade ends with exit code 1, as a failing installer does.
	UpgradeError bool
	// RollbackUpgrade makes the upgraded version fail to boot: after the reboot the node comes back
	// on the version it ran before (Talos' A/B boot fallback), with the same configuration.
	RollbackUpgrade bool
	// PullError makes image pulls fail (a registry that does not answer).
	PullError bool
	// SnapshotError makes EtcdSnapshot fail with this code (e.g. codes.Unavailable or
	// codes.Internal) before it streams anything, as when machined cannot reach its etcd member.
	// codes.OK (the zero value) means no fault.
	SnapshotError codes.Code
	// SnapshotTruncated makes EtcdSnapshot stream only the first half of the member's real snapshot
	// and end the stream successfully: what machined does when etcd's snapshot stream breaks off
	// (its chunker ends the stream without an error). The result has no valid digest: etcdutl
	// and a recovering Bootstrap refuse it.
	SnapshotTruncated bool
}

// SetFaults replaces the node's faults.
func (n *Node) SetFaults(f Faults) {
	n.mu.Lock()
	defer n.mu.Unlock()

	n.opts.Faults = f
}

func (n *Node) currentFaults() Faults {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.opts.Faults
}

// faults injects the latency and failures Options ask for.
type faults struct {
	latency time.Duration
	rate    float64

	mu  sync.Mutex
	rng *rand.Rand
}

func newFaults(o Options) *faults {
	return &faults{
		latency: o.Latency,
		rate:    o.FailureRate,
		rng:     rand.New(rand.NewPCG(o.Seed, 0x7a105)), //nolint:gosec // a test knob, not security
	}
}

// inject delays the call and then maybe fails it with codes.Unavailable.
func (f *faults) inject(ctx context.Context, method string) error {
	if f.latency > 0 {
		t := time.NewTimer(f.latency)
		defer t.Stop()

		select {
		case <-t.C:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}

	if f.rate <= 0 {
		return nil
	}

	f.mu.Lock()
	draw := f.rng.Float64()
	f.mu.Unlock()

	if draw < f.rate {
		return status.Errorf(codes.Unavailable, "talosemu: injected failure of %s (failure rate %.2f)", method, f.rate)
	}

	return nil
}
