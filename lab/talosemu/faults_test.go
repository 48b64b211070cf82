package talosemu_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

func TestLatencyIsAddedToEveryCall(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{Latency: 150 * time.Millisecond})
	c := insecureClient(t, n)

	if _, err := c.Disks(nodeCtx(t, n)); err != nil { // connects
		t.Fatal(err)
	}

	start := time.Now()
	if _, err := c.Disks(nodeCtx(t, n)); err != nil {
		t.Fatal(err)
	}

	if took := time.Since(start); took < 150*time.Millisecond || took > 2*time.Second {
		t.Fatalf("call took %v with 150ms latency", took)
	}
}

// failures makes calls Disks calls and returns how many failed; any failure must be Unavailable.
func failures(t *testing.T, n *talosemu.Node, calls int) int {
	t.Helper()

	c := insecureClient(t, n)
	failed := 0

	for range calls {
		_, err := c.Disks(nodeCtx(t, n))
		if err != nil {
			wantCode(t, err, codes.Unavailable)

			failed++
		}
	}

	return failed
}

func TestFailureRateIsSeededAndRoughlyRight(t *testing.T) {
	t.Parallel()

	const calls = 200

	opts := talosemu.Options{FailureRate: 0.3, Seed: 42}
	first := failures(t, startNode(t, opts), calls)

	if share := float64(first) / calls; share < 0.2 || share > 0.4 {
		t.Fatalf("%d of %d calls failed with failure rate 0.3", first, calls)
	}

	if again := failures(t, startNode(t, opts), calls); again != first {
		t.Errorf("same seed, different failures: %d then %d", first, again)
	}

	if none := failures(t, startNode(t, talosemu.Options{}), 20); none != 0 {
		t.Errorf("%d failures without a failure rate", none)
	}
}

func TestNodeThatNeverComesUp(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		mode talosemu.Unreachable
		want codes.Code
	}{
		{talosemu.HangHandshake, codes.DeadlineExceeded},
		{talosemu.RefuseConnections, codes.Unavailable},
	} {
		n := startNode(t, talosemu.Options{Unreachable: tc.mode})

		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		start := time.Now()
		_, err := insecureClient(t, n).Disks(ctx)

		cancel()

		if got := status.Code(err); got != tc.want {
			t.Errorf("mode %d: %v after %v, want %v", tc.mode, err, time.Since(start), tc.want)
		}
	}
}
