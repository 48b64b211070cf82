package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAContextEndStopsEveryWait: a context that ends while Wait, Do or Until pauses (for an hour
// here) stops the pause at once. Wait and Until return ctx.Err() itself; Do wraps it with the
// last failure.
func TestAContextEndStopsEveryWait(t *testing.T) {
	t.Parallel()

	loops := []struct {
		name      string
		run       func(ctx context.Context, tried func()) error
		wrapsLast bool
	}{
		{name: "Wait", run: func(ctx context.Context, tried func()) error {
			tried()
			return Wait(ctx, time.Hour)
		}},
		{name: "Do", wrapsLast: true, run: func(ctx context.Context, tried func()) error {
			return Do(ctx, Every(time.Hour), func(context.Context) error { tried(); return errBusy })
		}},
		{name: "Until", run: func(ctx context.Context, tried func()) error {
			return Until(ctx, Backoff(time.Hour, time.Hour), func(context.Context) (bool, error) { tried(); return false, nil })
		}},
	}

	endings := []struct {
		name    string
		timeout time.Duration // 0: cancelled 20 ms after the first try
		want    error
	}{
		{name: "cancelled", want: context.Canceled},
		{name: "past its deadline", timeout: 50 * time.Millisecond, want: context.DeadlineExceeded},
	}

	for _, loop := range loops {
		for _, end := range endings {
			t.Run(loop.name+" "+end.name, func(t *testing.T) {
				t.Parallel()

				ctx, cancel := context.WithCancel(t.Context())
				if end.timeout > 0 {
					ctx, cancel = context.WithTimeout(t.Context(), end.timeout)
				}
				defer cancel()

				tries := 0
				tried := func() {
					if tries++; end.timeout == 0 {
						time.AfterFunc(20*time.Millisecond, cancel)
					}
				}

				done := make(chan error, 1)
				go func() { done <- loop.run(ctx, tried) }()

				var err error
				select {
				case err = <-done:
				case <-time.After(30 * time.Second):
					t.Fatalf("%s still waits 30 s after its context ended", loop.name)
				}

				switch {
				case tries != 1:
					t.Errorf("%d tries, want 1", tries)
				case loop.wrapsLast && (!errors.Is(err, end.want) || !errors.Is(err, errBusy)):
					t.Errorf("%s = %v, want it to wrap %v and %v", loop.name, err, end.want, errBusy)
				case !loop.wrapsLast && err != ctx.Err():
					t.Errorf("%s = %v, want ctx.Err() = %v itself", loop.name, err, end.want)
				}
			})
		}
	}
}
