package day2

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/conditions"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
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
	schedule    retry.Schedule

	mu     sync.Mutex
	tried  bool
	last   error
	failed bool
}

var _ conditions.Stateful = (*backoffCondition)(nil)

func newBackoffCondition(description string, assertion conditions.AssertionFunc) *backoffCondition {
	return &backoffCondition{
		description: description, assertion: assertion,
		schedule: retry.Backoff(100*time.Millisecond, 500*time.Millisecond).EachTry(checkTryTimeout),
	}
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

// Wait tries the assertion on b's schedule until it passes (or asks to be skipped) or ctx ends;
// ctx carries the gate's deadline.
func (b *backoffCondition) Wait(ctx context.Context) error {
	err := retry.Do(ctx, b.schedule, func(try context.Context) error {
		err := b.assertion(try)

		b.mu.Lock()
		b.tried, b.last = true, err
		b.mu.Unlock()

		if errors.Is(err, conditions.ErrSkipAssertion) {
			return nil
		}

		return err
	})
	if err != nil {
		b.mu.Lock()
		b.failed = true
		b.mu.Unlock()

		return ctx.Err()
	}

	return nil
}
