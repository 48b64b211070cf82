package day2

import (
	"context"
	"fmt"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
)

// Progress receives what an operation waits for, for Pulumi's log.
type Progress func(msg string)

func (p Progress) say(format string, args ...any) {
	if p != nil {
		p(fmt.Sprintf(format, args...))
	}
}

// poll calls try until it succeeds, ctx ends or timeout passes: at once, then after 100 ms, and
// half as long again after every failure up to a second between tries (a gate that passes a
// moment after the node is back is seen then, and a long wait does not hammer the node). Every
// 10 s (and whenever the reason changes) it reports what it still waits for. The error names the
// last reason.
func poll(ctx context.Context, timeout time.Duration, what string, progress Progress, try func(context.Context) error) error {
	return pollOn(ctx, retry.Backoff(100*time.Millisecond, time.Second), timeout, what, progress, try)
}

// pollEvery is poll with a fixed interval between tries.
func pollEvery(ctx context.Context, interval, timeout time.Duration, what string, progress Progress, try func(context.Context) error) error {
	return pollOn(ctx, retry.Every(interval), timeout, what, progress, try)
}

// pollOn is poll on the schedule s.
func pollOn(ctx context.Context, s retry.Schedule, timeout time.Duration, what string, progress Progress,
	try func(context.Context) error,
) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	start := time.Now()
	said, lastSaid := "", time.Time{}

	var last error

	err := retry.Do(ctx, s, func(ctx context.Context) error {
		if last = try(ctx); last == nil {
			return nil
		}

		if msg := last.Error(); msg != said || time.Since(lastSaid) >= 10*time.Second {
			progress.say("waiting for %s (%s elapsed): %s", what, time.Since(start).Round(time.Second), msg)
			said, lastSaid = msg, time.Now()
		}

		return last
	})
	if err != nil {
		return fmt.Errorf("%s: not reached after %s: %w", what, timeout, last)
	}

	return nil
}
