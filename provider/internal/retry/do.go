package retry

import (
	"context"
	"fmt"
)

// Do calls try until it returns nil or an error marked Permanent, s allows no more retries, or
// ctx ends while Do waits to try again. It returns nil, the permanent error (without its mark),
// the last error when the retries ran out, or an error that wraps both ctx.Err() and the last
// error when ctx ended. Every other error is taken to pass: try marks what cannot.
func Do(ctx context.Context, s Schedule, try func(context.Context) error) error {
	var last error

	err := run(ctx, s, func(ctx context.Context) bool {
		last = try(ctx)
		return last == nil || isPermanent(last)
	})
	if err != nil && err != ErrNotDone {
		return fmt.Errorf("%w (after %w)", err, last)
	}

	return unmark(last)
}
