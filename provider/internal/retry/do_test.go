package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	t.Parallel()

	busy := errors.New("HTTP 503: busy")
	refused := errors.New("HTTP 403: permission denied")
	quick := After(time.Millisecond, time.Millisecond, time.Millisecond)

	for _, tc := range []struct {
		name      string
		s         Schedule
		answers   []error // what each try returns; the last one repeats
		wantTries int
		want      error  // nil: Do succeeds; otherwise Do's error wraps it…
		wantText  string // …and reads so
	}{
		{name: "success at once", s: quick, answers: []error{nil}, wantTries: 1},
		{name: "success after two failures", s: quick, answers: []error{busy, busy, nil}, wantTries: 3},
		{name: "the retries run out: the last error", s: quick, answers: []error{busy}, wantTries: 4, want: busy, wantText: busy.Error()},
		{name: "no retries", s: Schedule{}, answers: []error{busy}, wantTries: 1, want: busy, wantText: busy.Error()},
		{name: "a permanent error stops at once", s: quick, answers: []error{Permanent(refused), nil}, wantTries: 1, want: refused, wantText: refused.Error()},
		{name: "a permanent error after a transient one", s: quick, answers: []error{busy, Permanent(refused), nil}, wantTries: 2, want: refused, wantText: refused.Error()},
		{
			name: "a wrapped permanent error stops too", s: quick,
			answers: []error{fmt.Errorf("reading: %w", Permanent(refused))}, wantTries: 1, want: refused, wantText: "reading: " + refused.Error(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			tries := 0

			err := Do(t.Context(), tc.s, func(context.Context) error {
				tries++
				return tc.answers[min(tries, len(tc.answers))-1]
			})

			if tries != tc.wantTries {
				t.Errorf("%d tries, want %d", tries, tc.wantTries)
			}

			if tc.want == nil {
				if err != nil {
					t.Errorf("Do = %v, want nil", err)
				}

				return
			}

			if !errors.Is(err, tc.want) || err.Error() != tc.wantText {
				t.Errorf("Do = %v, want %q wrapping %v", err, tc.wantText, tc.want)
			}

			if isPermanent(err) && err.Error() == tc.want.Error() {
				t.Errorf("Do returned the permanent error still marked: %#v", err)
			}
		})
	}
}

// TestDoStopsWhenTheContextEnds: a context that ends while Do waits (an hour here) stops it at
// once, with an error that wraps both the context's end and the last failure.
func TestDoStopsWhenTheContextEnds(t *testing.T) {
	t.Parallel()

	busy := errors.New("HTTP 503: busy")

	for _, tc := range []struct {
		name        string
		timeout     time.Duration // 0: no deadline
		cancelInTry bool
		want        error
	}{
		{name: "cancelled during the pause", cancelInTry: true, want: context.Canceled},
		{name: "past its deadline during the pause", timeout: 50 * time.Millisecond, want: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			ctx, cancel := context.WithCancel(t.Context())
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), tc.timeout)
			}
			defer cancel()

			tries := 0
			done := make(chan error, 1)

			go func() {
				done <- Do(ctx, Every(time.Hour), func(context.Context) error {
					if tries++; tc.cancelInTry {
						cancel()
					}

					return busy
				})
			}()

			select {
			case err := <-done:
				if !errors.Is(err, tc.want) || !errors.Is(err, busy) || tries != 1 {
					t.Errorf("Do = %v after %d tries, want %v wrapping %v after 1", err, tries, tc.want, busy)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Do still waits 30 s after its context ended")
			}
		})
	}
}

func TestDoOnAnEndedContextTriesOnce(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	tries := 0

	err := Do(ctx, Every(time.Hour), func(context.Context) error { tries++; return errors.New("no") })
	if tries != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v after %d tries, want the context's end after 1", err, tries)
	}
}

func TestPermanentAndContextEnded(t *testing.T) {
	t.Parallel()

	if Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}

	refused := errors.New("refused")
	if err := Permanent(refused); !errors.Is(err, refused) || err.Error() != "refused" {
		t.Errorf("Permanent(refused) = %v, want it to wrap refused with the same text", err)
	}

	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{refused, false},
		{context.Canceled, true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("GET /x: %w", context.DeadlineExceeded), true},
	} {
		if got := ContextEnded(tc.err); got != tc.want {
			t.Errorf("ContextEnded(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
