package etcdbackup

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Benchmark data: 100 transactions of 128 keys with 8 KiB values each (100 MiB), the most one
// request takes under etcd's default limits (128 operations, 1.5 MiB).
const (
	benchTxns       = 100
	benchKeysPerTxn = 128
	benchValueBytes = 8 << 10
)

// benchMember is an embedded etcd filled with 100 MiB of keys, once per benchmark process.
var benchMember = sync.OnceValues(func() (*memberForTest, error) {
	m, err := startMember()
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4)

	for txn := range benchTxns {
		g.Go(func() error {
			value := make([]byte, benchValueBytes)

			ops := make([]clientv3.Op, 0, benchKeysPerTxn)
			for k := range benchKeysPerTxn {
				_, _ = rand.Read(value)
				ops = append(ops, clientv3.OpPut(fmt.Sprintf("/registry/bench/%03d/%03d", txn, k), string(value)))
			}

			_, err := m.client.Txn(ctx).Then(ops...).Commit()

			return err
		})
	}

	if err := g.Wait(); err != nil {
		m.close()
		return nil, fmt.Errorf("filling etcd: %w", err)
	}

	closeAfterTests(m.close)

	return m, nil
})

// BenchmarkSnapshot compares etcd's own `snapshot save` (client/v3/snapshot.SaveWithVersion) with
// Take from a stream of the same member's Maintenance.Snapshot to a file:// destination, plain
// and age-encrypted; both verify and store the snapshot. It prints one line for `make bench`.
func BenchmarkSnapshot(b *testing.B) {
	m, err := benchMember()
	if err != nil {
		b.Fatal(err)
	}

	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}

	// With -count n, each sub-benchmark runs n times in one BenchmarkSnapshot: the line printed
	// gives the mean of the runs.
	var theirs, ours, oursAge []float64

	b.Run("etcd-snapshot-save", func(b *testing.B) {
		theirs = append(theirs, measure(b, func(dir string) (int64, error) {
			p := filepath.Join(dir, "etcd.snapshot")
			if _, err := snapshot.SaveWithVersion(b.Context(), zap.NewNop(), clientv3.Config{Endpoints: []string{m.endpoint()}}, p); err != nil {
				return 0, err
			}

			st, err := os.Stat(p)
			if err != nil {
				return 0, err
			}

			return st.Size(), nil
		}))
	})

	take := func(recipients []age.Recipient) func(dir string) (int64, error) {
		return func(dir string) (int64, error) {
			d, err := ParseDestination("file://" + dir)
			if err != nil {
				return 0, err
			}

			info, err := Take(b.Context(), m.source(), d, TakeOptions{ClusterName: "bench", Keep: 1, TempDir: dir, Recipients: recipients})

			return info.Size, err
		}
	}

	b.Run("take", func(b *testing.B) { ours = append(ours, measure(b, take(nil))) })
	b.Run("take-age", func(b *testing.B) { oursAge = append(oursAge, measure(b, take([]age.Recipient{id.Recipient()}))) })

	fmt.Printf("etcd snapshot MiB/s: %.0f (etcd snapshot save: %.0f; with age encryption: %.0f)\n", mean(ours), mean(theirs), mean(oursAge))
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}

	var sum float64
	for _, x := range xs {
		sum += x
	}

	return sum / float64(len(xs))
}

// measure runs save b.N times, each into a fresh directory (removed outside the timed part), and
// reports the snapshot bytes per second as MiB/s.
func measure(b *testing.B, save func(dir string) (int64, error)) float64 {
	b.Helper()

	var (
		total   int64
		elapsed time.Duration
	)

	b.StopTimer()

	for range b.N {
		dir, err := os.MkdirTemp("", "etcdbackup-bench-")
		if err != nil {
			b.Fatal(err)
		}

		start := time.Now()

		b.StartTimer()

		n, err := save(dir)

		b.StopTimer()

		elapsed += time.Since(start)
		total += n

		_ = os.RemoveAll(dir)

		if err != nil {
			b.Fatal(err)
		}
	}

	mibps := float64(total) / (1 << 20) / elapsed.Seconds()
	b.ReportMetric(mibps, "MiB/s")
	b.SetBytes(total / int64(b.N))

	return mibps
}
