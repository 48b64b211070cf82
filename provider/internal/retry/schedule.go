package retry

import (
	"context"
	"slices"
	"time"
)

// Schedule is when a failed try is made again: the pause before each retry, how many retries
// there may be, and how long one try may take. The zero Schedule makes no retry.
type Schedule struct {
	// pauses, when first is zero, are the waits before the first, second, … retry; their number
	// bounds the retries.
	pauses []time.Duration
	// first and most, when first is positive, are a backoff without end: first, then half as
	// long again after every retry up to most.
	first, most time.Duration
	// each bounds one try; zero leaves that to the caller's context.
	each time.Duration
}

// After is a schedule of fixed pauses: one retry after each of them, then no more.
func After(pauses ...time.Duration) Schedule {
	return Schedule{pauses: slices.Clone(pauses)}
}

// Every retries after the same pause every time, until the caller's context ends. The pause must
// be positive.
func Every(pause time.Duration) Schedule {
	return Backoff(pause, pause)
}

// Backoff retries after first, then half as long again after every failure up to most, until the
// caller's context ends: a condition that holds a moment after it was first tried is seen then,
// and a long wait does not hammer what it asks. first must be positive.
func Backoff(first, most time.Duration) Schedule {
	return Schedule{first: first, most: max(first, most)}
}

// EachTry returns s with every try bounded by d: a try that hangs fails and is made again
// instead of holding the loop until the caller's context ends.
func (s Schedule) EachTry(d time.Duration) Schedule {
	s.each = d
	return s
}

// Pause is the wait before retry n (0 is the first retry, after the first try failed); false
// when s allows no retry n.
func (s Schedule) Pause(n int) (time.Duration, bool) {
	if s.first <= 0 {
		if n < len(s.pauses) {
			return s.pauses[n], true
		}

		return 0, false
	}

	d := s.first
	for i := 0; i < n && d < s.most; i++ {
		d = min(d*3/2, s.most)
	}

	return d, true
}

// tryContext is the context of one try: ctx, bounded by EachTry's limit when s has one.
func (s Schedule) tryContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.each <= 0 {
		return ctx, func() {}
	}

	return context.WithTimeout(ctx, s.each)
}
