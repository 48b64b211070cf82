package retry

import (
	"context"
	"testing"
	"time"
)

func TestSchedulePauses(t *testing.T) {
	t.Parallel()

	const ms = time.Millisecond

	for _, tc := range []struct {
		name string
		s    Schedule
		want []time.Duration // the pauses before retries 0, 1, …; the schedule allows no more
		tail time.Duration   // for an endless schedule: the pause far later (retry 1000)
	}{
		{name: "zero: no retry", s: Schedule{}},
		{name: "no pauses: no retry", s: After()},
		{name: "fixed pauses, then none", s: After(250*ms, 500*ms, time.Second), want: []time.Duration{250 * ms, 500 * ms, time.Second}},
		{name: "every", s: Every(500 * ms), want: []time.Duration{500 * ms, 500 * ms, 500 * ms}, tail: 500 * ms},
		{
			name: "backoff: half as long again up to the most", s: Backoff(100*ms, time.Second),
			want: []time.Duration{100 * ms, 150 * ms, 225 * ms, 337500 * time.Microsecond, 506250 * time.Microsecond, 759375 * time.Microsecond, time.Second, time.Second},
			tail: time.Second,
		},
		{name: "backoff to a quarter second", s: Backoff(100*ms, 250*ms), want: []time.Duration{100 * ms, 150 * ms, 225 * ms, 250 * ms}, tail: 250 * ms},
		{name: "a most below first is first", s: Backoff(100*ms, 10*ms), want: []time.Duration{100 * ms, 100 * ms}, tail: 100 * ms},
		{name: "a bound on each try keeps the pauses", s: After(ms, 2*ms).EachTry(time.Second), want: []time.Duration{ms, 2 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			for n, want := range tc.want {
				if got, ok := tc.s.Pause(n); !ok || got != want {
					t.Errorf("Pause(%d) = %v, %v; want %v, true", n, got, ok, want)
				}
			}

			if tc.tail == 0 {
				if got, ok := tc.s.Pause(len(tc.want)); ok {
					t.Errorf("Pause(%d) = %v, true; want no retry after the last pause", len(tc.want), got)
				}

				return
			}

			if got, ok := tc.s.Pause(1000); !ok || got != tc.tail {
				t.Errorf("Pause(1000) = %v, %v; want %v, true", got, ok, tc.tail)
			}
		})
	}
}

func TestAfterKeepsItsOwnPauses(t *testing.T) {
	t.Parallel()

	pauses := []time.Duration{time.Millisecond}
	s := After(pauses...)
	pauses[0] = time.Hour

	if got, _ := s.Pause(0); got != time.Millisecond {
		t.Errorf("the caller's slice changed the schedule: Pause(0) = %v", got)
	}
}

func TestEachTryBoundsEveryTry(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name         string
		s            Schedule
		wantDeadline bool
	}{
		{"unbounded", After(time.Millisecond), false},
		{"bounded", After(time.Millisecond).EachTry(time.Minute), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			tries := 0

			err := Do(t.Context(), tc.s, func(ctx context.Context) error {
				tries++

				d, ok := ctx.Deadline()
				if ok != tc.wantDeadline || (ok && time.Until(d) > time.Minute) {
					t.Errorf("try %d: deadline %v (set %v), want set %v and within a minute", tries, d, ok, tc.wantDeadline)
				}

				if tries < 2 {
					return context.DeadlineExceeded // a try that ran out of its own time is made again
				}

				return nil
			})
			if err != nil || tries != 2 {
				t.Errorf("Do = %v after %d tries, want nil after 2", err, tries)
			}
		})
	}
}
