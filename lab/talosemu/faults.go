package talosemu

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
