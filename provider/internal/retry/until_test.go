package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	t.Parallel()

	gone := errors.New("the task vanished")

	type answer struct {
		done bool
		err  error
	}

	for _, tc := range []struct {
		name      string
		s         Schedule
		answers   []answer // the last one repeats
		wantTries int
		want      error
	}{
		{name: "done at once", s: Every(time.Millisecond), answers: []answer{{done: true}}, wantTries: 1},
		{name: "done on the third try", s: Every(time.Millisecond), answers: []answer{{}, {}, {done: true}}, wantTries: 3},
		{name: "an error stops the wait", s: Every(time.Millisecond), answers: []answer{{}, {err: gone}, {done: true}}, wantTries: 2, want: gone},
		{name: "the retries run out", s: After(time.Millisecond, time.Millisecond), answers: []answer{{}}, wantTries: 3, want: ErrNotDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			tries := 0

			err := Until(t.Context(), tc.s, func(context.Context) (bool, error) {
				tries++
				a := tc.answers[min(tries, len(tc.answers))-1]

				return a.done, a.err
			})
			if err != tc.want || tries != tc.wantTries {
				t.Errorf("Until = %v after %d tries, want %v after %d", err, tries, tc.want, tc.wantTries)
			}
		})
	}
}
