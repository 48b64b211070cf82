package retry

import (
	"context"
	"errors"
)

// ErrNotDone is Until's error when s allows no more retries and the condition still does not
// hold.
var ErrNotDone = errors.New("retry: the condition did not hold by the last try")

// Until calls cond until it reports done or returns an error (a wait stops at once on what will
// not change), s allows no more retries (ErrNotDone) or ctx ends while Until waits (ctx.Err(),
// as it is). It returns nil when cond is done, else cond's error.
func Until(ctx context.Context, s Schedule, cond func(context.Context) (done bool, err error)) error {
	var err error

	if werr := run(ctx, s, func(ctx context.Context) bool {
		var done bool

		done, err = cond(ctx)

		return done || err != nil
	}); werr != nil {
		return werr
	}

	return err
}
