package day2

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/conditions"
)

// TestBackoffCondition: the health checks' condition reports its state as Talos' polling
// condition does (conditions.StatusLine), tries again after a failure, gives each try its own
// deadline (not the retry interval, which Talos' condition uses, so a slow Kubernetes list would
// never finish), and records the last error when the gate's context ends.
func TestBackoffCondition(t *testing.T) {
	t.Parallel()

	notYet := errors.New("worker-1 is NotReady")

	tries := 0

	var deadlines []time.Duration

	c := newBackoffCondition("all nodes to be Ready", func(ctx context.Context) error {
		tries++

		d, ok := ctx.Deadline()
		if !ok {
			t.Error("a try has no deadline")
		}

		deadlines = append(deadlines, time.Until(d))

		if tries < 3 {
			return notYet
		}

		return nil
	})

	if got := conditions.StatusLine(c); got != "all nodes to be Ready: ..." {
		t.Errorf("before the first try: %q", got)
	}

	if err := c.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}

	if tries != 3 {
		t.Errorf("%d tries, want 3 (two failures, then success)", tries)
	}

	for _, d := range deadlines {
		if d < checkTryTimeout/2 {
			t.Errorf("a try had %s left, want about %s", d, checkTryTimeout)
		}
	}

	if got := conditions.StatusLine(c); got != "all nodes to be Ready: OK" {
		t.Errorf("after success: %q", got)
	}

	skipped := newBackoffCondition("coredns to report ready", func(context.Context) error { return conditions.ErrSkipAssertion })
	if err := skipped.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}

	if got := conditions.StatusLine(skipped); got != "coredns to report ready: SKIP" {
		t.Errorf("skipped: %q", got)
	}

	never := newBackoffCondition("all nodes to be Ready", func(context.Context) error { return notYet })

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()

	if err := never.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait = %v, want the context's end", err)
	}

	if state, err := never.State(); state != conditions.StateFailed || !errors.Is(err, notYet) {
		t.Errorf("after the context ended: state %v, %v; want failed with the last error", state, err)
	}

	if got := conditions.StatusLine(never); got != "all nodes to be Ready: worker-1 is NotReady" {
		t.Errorf("failed: %q", got)
	}
}
