package day2

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPollRetriesUntilTheTrySucceeds(t *testing.T) {
	tries := 0

	var said []string

	err := poll(t.Context(), time.Minute, "the gate", func(m string) { said = append(said, m) }, func(context.Context) error {
		if tries++; tries < 4 {
			return errors.New("not yet")
		}

		return nil
	})
	if err != nil || tries != 4 {
		t.Fatalf("poll returned %v after %d tries, want nil after 4", err, tries)
	}

	// The reason is reported once while it stays the same.
	if len(said) != 1 || !strings.Contains(said[0], "waiting for the gate") || !strings.Contains(said[0], "not yet") {
		t.Errorf("progress: %q", said)
	}
}

func TestPollTimesOutNamingWhatAndWhy(t *testing.T) {
	err := poll(t.Context(), 300*time.Millisecond, "etcd on cp-1", nil, func(context.Context) error {
		return errors.New("etcd member cp-1 has no leader")
	})
	if err == nil || !strings.Contains(err.Error(), "etcd on cp-1: not reached after 300ms") ||
		!strings.Contains(err.Error(), "has no leader") {
		t.Fatalf("got %v", err)
	}
}
