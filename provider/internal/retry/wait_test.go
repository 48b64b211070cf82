package retry

import (
	"context"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	t.Parallel()

	ended, cancel := context.WithCancel(t.Context())
	cancel()

	for _, tc := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{"the pause passes", t.Context(), time.Millisecond, nil},
		{"an ended context returns at once", ended, time.Hour, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			if err := Wait(tc.ctx, tc.d); err != tc.want {
				t.Errorf("Wait = %v, want %v", err, tc.want)
			}
		})
	}
}
