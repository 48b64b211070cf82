package day2

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// TestWaitForMAC: the wait reports each sweep, ends with ErrNotFound once its time has passed and
// with ctx.Err() itself when its context ends between sweeps. The scanned subnet is loopback,
// where no Talos node in maintenance mode has the MAC below.
func TestWaitForMAC(t *testing.T) {
	t.Parallel()

	loopback := netip.MustParsePrefix("127.0.0.1/32")

	for _, tc := range []struct {
		name       string
		mac        string
		timeout    time.Duration
		ctxTimeout time.Duration // 0: none
		want       error         // nil: any error but ErrNotFound
		ctxErr     bool          // the error is ctx.Err() itself
		wantSweeps int           // progress calls; -1: at least one
	}{
		{name: "not a MAC: no sweep", mac: "nope", timeout: time.Hour},
		{name: "the time passes", mac: "bc:24:11:00:00:01", timeout: 0, want: ErrNotFound, wantSweeps: 1},
		{
			name: "the context ends between sweeps", mac: "bc:24:11:00:00:01", timeout: time.Hour, ctxTimeout: 200 * time.Millisecond,
			want: context.DeadlineExceeded, ctxErr: true, wantSweeps: -1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			ctx, cancel := context.WithCancel(t.Context())
			if tc.ctxTimeout > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), tc.ctxTimeout)
			}
			defer cancel()

			sweeps := 0
			done := make(chan error, 1)

			go func() {
				a, err := WaitForMAC(ctx, loopback, tc.mac, tc.timeout, func(time.Duration) { sweeps++ })
				if a.IsValid() {
					t.Errorf("found %s", a)
				}
				done <- err
			}()

			var err error

			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("WaitForMAC still runs after 60 s")
			}

			switch {
			case err == nil || (tc.want == nil && errors.Is(err, ErrNotFound)) || (tc.want != nil && !errors.Is(err, tc.want)):
				t.Errorf("WaitForMAC = %v, want %v", err, tc.want)
			case tc.ctxErr && err != ctx.Err():
				t.Errorf("WaitForMAC = %#v, want ctx.Err() itself", err)
			}

			if (tc.wantSweeps >= 0 && sweeps != tc.wantSweeps) || (tc.wantSweeps < 0 && sweeps == 0) {
				t.Errorf("progress after %d sweeps, want %d (-1: some)", sweeps, tc.wantSweeps)
			}
		})
	}
}
