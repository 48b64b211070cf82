package discover

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

	expired, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()

	for _, tc := range []struct {
		name       string
		ctx        context.Context
		mac        string
		timeout    time.Duration
		want       error // nil: an error other than ErrNotFound
		wantSweeps int   // progress calls; -1: at least one
	}{
		{name: "not a MAC: no sweep", ctx: t.Context(), mac: "nope", timeout: time.Hour},
		{name: "the time passes", ctx: t.Context(), mac: "bc:24:11:00:00:01", want: ErrNotFound, wantSweeps: 1},
		{name: "the context ends", ctx: expired, mac: "bc:24:11:00:00:01", timeout: time.Hour, want: context.DeadlineExceeded, wantSweeps: -1},
	} {
		sweeps := 0

		a, err := WaitForMAC(tc.ctx, loopback, tc.mac, tc.timeout, func(time.Duration) { sweeps++ })

		switch {
		case a.IsValid():
			t.Errorf("%s: found %s", tc.name, a)
		case err == nil || (tc.want == nil && errors.Is(err, ErrNotFound)) || (tc.want != nil && !errors.Is(err, tc.want)):
			t.Errorf("%s: WaitForMAC = %v, want %v", tc.name, err, tc.want)
		case tc.ctx == expired && err != expired.Err():
			t.Errorf("%s: WaitForMAC = %#v, want ctx.Err() itself", tc.name, err)
		}

		if (tc.wantSweeps >= 0 && sweeps != tc.wantSweeps) || (tc.wantSweeps < 0 && sweeps == 0) {
			t.Errorf("%s: progress after %d sweeps, want %d (-1: some)", tc.name, sweeps, tc.wantSweeps)
		}
	}
}
