package pveclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestLoginWaitsStopWithTheContext: a login repeated after a 503 waits on the context, not on a
// sleep: with an hour between tries, the caller's deadline ends it.
func TestLoginWaitsStopWithTheContext(t *testing.T) {
	t.Parallel()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "pveproxy restarting", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)

	c, err := New(Credentials{Endpoint: srv.URL, Username: "root@pam", Password: "x"})
	if err != nil {
		t.Fatal(err)
	}

	c.Retry = []time.Duration{time.Hour}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()

	done := make(chan error, 1)

	go func() { _, err := c.Guest(ctx, 1); done <- err }()

	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "HTTP 503") {
			t.Errorf("want the deadline after the last 503, got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the login still waits 30 s after its context ended")
	}
}

func TestWaitTaskStopsWithTheContext(t *testing.T) {
	t.Parallel()

	f, c := newFake(t)
	f.running = true

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()

	upid := "UPID:pve1:00000001:00000002:00000003:qmdestroy:812345:root@pam!t:"

	err := c.WaitTask(ctx, "pve1", upid)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for task "+upid) {
		t.Errorf("want the deadline, naming the task, got %v", err)
	}
}
