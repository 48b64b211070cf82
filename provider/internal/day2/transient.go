package day2

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// readRetries bounds how often a read is sent again after a transient failure.
const readRetries = 5

// retryReads sends a read (GET or HEAD) again when the API server could not answer it for a
// reason that passes: a connection that failed, or a 500/502/503/504. While a control plane leaves
// the cluster, requests through the endpoint (a VIP, or a load balancer in front of every
// apiserver) briefly reach an apiserver whose etcd member is gone, or a VIP that is moving; one
// such answer must not fail a removal or make a retirement conclude that the cluster is down.
// Writes are never repeated: client-go and the callers decide about them.
type retryReads struct {
	next  http.RoundTripper
	pause func(attempt int) time.Duration
}

// wrapRetryReads is a rest.Config WrapTransport.
func wrapRetryReads(rt http.RoundTripper) http.RoundTripper {
	return retryReads{next: rt, pause: func(attempt int) time.Duration {
		return time.Duration(100<<attempt) * time.Millisecond // 0.1, 0.2, 0.4, 0.8, 1.6 s
	}}
}

func (r retryReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return r.next.RoundTrip(req)
	}

	for attempt := 0; ; attempt++ {
		resp, err := r.next.RoundTrip(req)
		if attempt == readRetries || !transient(req.Context(), resp, err) {
			return resp, err
		}

		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // drained to reuse the connection
			resp.Body.Close()                                      //nolint:errcheck
		}

		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(r.pause(attempt)):
		}
	}
}

func transient(ctx context.Context, resp *http.Response, err error) bool {
	if err != nil {
		return ctx.Err() == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}

	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return resp.Header.Get("Retry-After") == "" // client-go honours Retry-After itself
	}

	return false
}
