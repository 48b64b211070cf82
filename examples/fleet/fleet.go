package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Result is what reconciling one cluster came to.
type Result struct {
	Cluster string
	// Err is nil when the action succeeded.
	Err      error
	Duration time.Duration
	// Endpoint is the cluster's Kubernetes API endpoint output, when the stack has one.
	Endpoint string
	// Changes summarises the resource operations, e.g. "create=5" or "same=9".
	Changes string
	// Started is false for a cluster the fleet never reached (interrupted).
	Started bool
}

// reconcileFunc reconciles one cluster, writing its progress to progress.
type reconcileFunc func(ctx context.Context, c Cluster, progress io.Writer) Result

// runFleet reconciles every cluster with at most parallel of them at a time. A cluster's failure
// does not stop the others; once ctx ends, clusters not yet started are skipped. Each cluster's
// progress goes to out, every line prefixed with "[name] ". The results are in the clusters' order.
func runFleet(ctx context.Context, clusters []Cluster, parallel int, out io.Writer, reconcile reconcileFunc) []Result {
	var (
		mu      sync.Mutex // serialises lines on out
		wg      sync.WaitGroup
		slots   = make(chan struct{}, max(parallel, 1))
		results = make([]Result, len(clusters))
	)

	for i, c := range clusters {
		if !acquire(ctx, slots) {
			results[i] = Result{Cluster: c.Name, Err: fmt.Errorf("not started: %w", context.Cause(ctx))}
			continue
		}

		wg.Go(func() {
			defer func() { <-slots }()

			progress := &prefixWriter{mu: &mu, out: out, prefix: "[" + c.Name + "] "}

			start := time.Now()
			r := reconcile(ctx, c, progress)
			r.Cluster, r.Started = c.Name, true
			r.Duration = time.Since(start)
			progress.Flush() // a last line without a newline, before the verdict

			if r.Err != nil {
				_, _ = fmt.Fprintf(progress, "failed after %s: %s\n", r.Duration.Round(time.Second), shortError(r.Err))
			} else {
				_, _ = fmt.Fprintf(progress, "done in %s\n", r.Duration.Round(time.Second))
			}

			results[i] = r
		})
	}

	wg.Wait()

	return results
}

// acquire takes a slot, waiting for one to free up; false once ctx has ended.
func acquire(ctx context.Context, slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		if ctx.Err() != nil {
			<-slots
			return false
		}

		return true
	case <-ctx.Done():
		return false
	}
}

// prefixWriter writes whole lines to out, each starting with prefix, so that the progress of
// clusters running side by side interleaves line by line and stays readable. Writers that share
// mu may be used from several goroutines.
type prefixWriter struct {
	mu     *sync.Mutex
	out    io.Writer
	prefix string
	buf    []byte
}

// Write buffers p and writes out every line it completes.
func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()

	w.buf = append(w.buf, p...)

	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}

		line := w.buf[:i]
		w.buf = w.buf[i+1:]

		if _, err := fmt.Fprintf(w.out, "%s%s\n", w.prefix, bytes.TrimRight(line, "\r")); err != nil {
			return len(p), err
		}
	}
}

// Flush writes a last line that has no newline yet.
func (w *prefixWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()

	if len(w.buf) > 0 {
		_, _ = fmt.Fprintf(w.out, "%s%s\n", w.prefix, w.buf)
		w.buf = nil
	}
}
