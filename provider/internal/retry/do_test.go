package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// errBusy is a failure that passes, as a busy API answers.
var errBusy = errors.New("HTTP 503: busy")

func TestDo(t *testing.T) {
	t.Parallel()

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
		{name: "success after two failures", s: quick, answers: []error{errBusy, errBusy, nil}, wantTries: 3},
		{name: "the retries run out: the last error", s: quick, answers: []error{errBusy}, wantTries: 4, want: errBusy, wantText: errBusy.Error()},
		{name: "no retries", s: Schedule{}, answers: []error{errBusy}, wantTries: 1, want: errBusy, wantText: errBusy.Error()},
		{name: "a permanent error stops at once", s: quick, answers: []error{Permanent(refused), nil}, wantTries: 1, want: refused, wantText: refused.Error()},
		{name: "a permanent error after a transient one", s: quick, answers: []error{errBusy, Permanent(refused), nil}, wantTries: 2, want: refused, wantText: refused.Error()},
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
