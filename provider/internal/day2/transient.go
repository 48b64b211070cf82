package day2

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
)

// readRetries bounds how often a read is sent again after a transient failure.
const readRetries = 5

// readPauses are the waits before each repeat of a read: 0.1, 0.2, 0.4, 0.8 and 1.6 s.
var readPauses = [readRetries]time.Duration{
	100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
}

// retryReads sends a read (GET or HEAD) again when the API server could not answer it for a
// reason that passes: a connection that failed, or a 500/502/503/504. While a control plane leaves
// the cluster, requests through the endpoint (a VIP, or a load balancer in front of every
// apiserver) briefly reach an apiserver whose etcd member is gone, or a VIP that is moving; one
// such answer must not fail a removal or make a retirement conclude that the cluster is down.
// Writes are never repeated: client-go and the callers decide about them.
type retryReads struct {
	next     http.RoundTripper
	schedule retry.Schedule
}

// wrapRetryReads is a rest.Config WrapTransport.
func wrapRetryReads(rt http.RoundTripper) http.RoundTripper {
	return retryReads{next: rt, schedule: retry.After(readPauses[:]...)}
}

// errSendAgain is a try of a read that met a transient failure.
var errSendAgain = errors.New("a transient failure: the read is sent again")

func (r retryReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return r.next.RoundTrip(req)
	}

	ctx := req.Context()

	var (
		resp *http.Response
		err  error
	)

	again := retry.Do(ctx, r.schedule, func(context.Context) error {
		discard(resp) // the transient answer before this try

		if resp, err = r.next.RoundTrip(req); transient(ctx, resp, err) {
			return errSendAgain
		}

		return nil
	})
	if again != nil && again != errSendAgain { // Do returns the last try's error itself
		// ctx ended while the read waited to be sent again.
		discard(resp)

		return nil, ctx.Err()
	}

	return resp, err
}

// discard drains and closes an answer that is not returned, so that its connection is reused.
func discard(resp *http.Response) {
	if resp != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // drained to reuse the connection
		resp.Body.Close()                                      //nolint:errcheck
	}
}

// transient tells whether a Kubernetes API read may succeed when sent again: a connection that
// failed while ctx is alive, or a 500/502/503/504 that does not say when to ask again.
func transient(ctx context.Context, resp *http.Response, err error) bool {
	if err != nil {
		return ctx.Err() == nil && !retry.ContextEnded(err)
	}

	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return resp.Header.Get("Retry-After") == "" // client-go honours Retry-After itself
	}

	return false
}
