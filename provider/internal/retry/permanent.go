package retry

import (
	"context"
	"errors"
)

// permanent marks an error that trying again cannot mend.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }

func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as a failure that trying again cannot mend, so that Do stops and returns
// it; nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}

	return permanent{err}
}

func isPermanent(err error) bool {
	var p permanent

	return errors.As(err, &p)
}

// unmark is err without Permanent's mark, when it is the outermost wrapping.
func unmark(err error) error {
	if p, ok := err.(permanent); ok { // only the outermost mark: Do returns what try returned
		return p.err
	}

	return err
}

// ContextEnded tells whether err is a context's end (cancelled, or past its deadline): a failure
// that a protocol's transient classifier never repeats, unlike a connection refused or reset.
func ContextEnded(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
