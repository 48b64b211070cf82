package day2

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/conditions"
)

// checkTryTimeout bounds one try of a health check (a Kubernetes list, a few Talos calls).
const checkTryTimeout = 10 * time.Second

// backoffCondition is Talos' PollingCondition (conditions.PollingCondition) on a faster schedule:
// it tries at once, then after 100 ms, half as long again after every failure up to half a second
// (a try is one Kubernetes list or a few Talos calls, and the gate ends every up), each try
// bounded by checkTryTimeout. Talos' condition tries every interval and bounds each try by that
// same interval, so a check that fails once while the cluster forms (a Node not yet Ready) held
// the gate a whole interval (2 s) after it would have passed.
type backoffCondition struct {
	description string
	assertion   conditions.AssertionFunc
	first, most time.Duration

	mu     sync.Mutex
	tried  bool
	last   error
	failed bool
}

var _ conditions.Stateful = (*backoffCondition)(nil)

func newBackoffCondition(description string, assertion conditions.AssertionFunc) *backoffCondition {
	return &backoffCondition{description: description, assertion: assertion, first: 100 * time.Millisecond, most: 500 * time.Millisecond}
}

func (b *backoffCondition) String() string { return b.description }

// State is what conditions.StatusLine reports (see pollingCondition.State).
func (b *backoffCondition) State() (conditions.State, error) {
	b.mu.Lock()
	defer b.mu.Unlock()

	switch {
	case b.failed:
		return conditions.StateFailed, b.last
	case !b.tried:
		return conditions.StateRunning, nil
	case b.last == nil:
		return conditions.StateSucceeded, nil
	case errors.Is(b.last, conditions.ErrSkipAssertion):
		return conditions.StateSkipped, nil
	default:
		return conditions.StateRunning, b.last
	}
}

// Wait tries the assertion until it passes (or asks to be skipped) or ctx ends.
func (b *backoffCondition) Wait(ctx context.Context) error {
	interval := b.first

	for {
		try, cancel := context.WithTimeout(ctx, checkTryTimeout)
		err := b.assertion(try)

		cancel()

		b.mu.Lock()
		b.tried, b.last = true, err
		b.mu.Unlock()

		if err == nil || errors.Is(err, conditions.ErrSkipAssertion) {
			return nil
		}

		select {
		case <-ctx.Done():
			b.mu.Lock()
			b.failed = true
			b.mu.Unlock()

			return ctx.Err()
		case <-time.After(interval):
		}

		interval = min(interval*3/2, b.most)
	}
}
