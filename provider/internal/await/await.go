// Package await is the one way the component waits for a Pulumi output's value while it wires
// the cluster: inputs that must be checked before anything is registered (config patches,
// manifest contents), a resource's URN (to find which provider a resource is), an invoke's
// answer, and values a running cluster already has in its state (credentials, addresses).
//
// Every wait is bounded by its context: an output that never resolves (a resource the engine
// does not register in a preview, say) ends the wait with the context's error instead of holding
// Construct.
package await

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
)

// ErrUnknown is returned for an output whose value is not known (a preview of a resource that
// does not exist yet).
var ErrUnknown = errors.New("not known yet")

// Value waits for o and returns its value as a T. It returns ErrUnknown when the value is
// unknown, and an error naming the type when the value is not a T.
func Value[T any](ctx context.Context, o pulumi.Output) (T, error) {
	var zero T

	res, err := internals.UnsafeAwaitOutput(ctx, o)
	if err != nil {
		return zero, err
	}

	if !res.Known {
		return zero, ErrUnknown
	}

	v, ok := res.Value.(T)
	if !ok {
		return zero, fmt.Errorf("the output holds %T, not %T", res.Value, zero)
	}

	return v, nil
}

// Known waits for o and tells whether its value is known; the value is returned when it is.
// Unlike Value, an unknown value is not an error.
func Known[T any](ctx context.Context, o pulumi.Output) (T, bool, error) {
	v, err := Value[T](ctx, o)
	if errors.Is(err, ErrUnknown) {
		return v, false, nil
	}

	return v, err == nil, err
}

// URN waits at most timeout for r's URN, which resolves once the engine registered r.
func URN(ctx context.Context, r pulumi.Resource, timeout time.Duration) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	u, err := Value[pulumi.URN](ctx, r.URN())
	if err != nil {
		return "", false
	}

	return string(u), true
}
