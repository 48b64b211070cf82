package retry

import (
	"context"
	"time"
)

// Wait pauses for d, or less when ctx ends first; it then returns ctx.Err(). The pause is a timer
// raced against ctx.Done(), never a sleep that a cancellation cannot cut short.
func Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}

	t := time.NewTimer(d)
	defer t.Stop()

	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// run is the loop under Do and Until: it calls try, pausing between calls as s says, until try
// reports that it is done (nil), s allows no more retries (ErrNotDone) or ctx ends during a pause
// (ctx.Err()). The first try is always made.
func run(ctx context.Context, s Schedule, try func(context.Context) (done bool)) error {
	for n := 0; ; n++ {
		tctx, cancel := s.tryContext(ctx)
		done := try(tctx)

		cancel()

		if done {
			return nil
		}

		pause, ok := s.Pause(n)
		if !ok {
			return ErrNotDone
		}

		if err := Wait(ctx, pause); err != nil {
			return err
		}
	}
}
