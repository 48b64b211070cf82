package etcdbackup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// memberForTest is one embedded etcd member on 127.0.0.1, with a client.
type memberForTest struct {
	etcd   *embed.Etcd
	client *clientv3.Client
}

// startMember starts a single-member etcd in a new directory under the package's once-root, on
// free loopback ports.
func startMember() (*memberForTest, error) {
	dir, err := tempDirForOnce()
	if err != nil {
		return nil, err
	}

	cfg := embed.NewConfig()
	cfg.Name = "backup-test"
	cfg.Dir = dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true

	clientURL, err := freeURL()
	if err != nil {
		return nil, err
	}

	peerURL, err := freeURL()
	if err != nil {
		return nil, err
	}

	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting etcd: %w", err)
	}

	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd was not ready after 60 s")
	}

	c, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL.String()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		e.Close()
		return nil, err
	}

	return &memberForTest{etcd: e, client: c}, nil
}

func (m *memberForTest) close() {
	_ = m.client.Close()
	m.etcd.Close()
}

// endpoint is the member's client URL.
func (m *memberForTest) endpoint() string { return m.etcd.Clients[0].Addr().String() }

// source streams the member's snapshot (clientv3 Maintenance.Snapshot), as Talos' EtcdSnapshot
// does on a control plane.
func (m *memberForTest) source() Source {
	return SourceFunc(func(ctx context.Context) (io.ReadCloser, error) {
		return m.client.Snapshot(ctx)
	})
}

// freeURL is an http URL on a loopback port that was free a moment ago.
func freeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close() //nolint:errcheck // only its port was wanted

	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

// testSnapshot is one small real snapshot, taken once for the package's tests.
var testSnapshot = sync.OnceValues(func() ([]byte, error) {
	m, err := startMember()
	if err != nil {
		return nil, err
	}
	defer m.close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for i := range 50 {
		if _, err := m.client.Put(ctx, fmt.Sprintf("/registry/test/key-%03d", i), fmt.Sprintf("value %d", i)); err != nil {
			return nil, err
		}
	}

	r, err := m.client.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close() //nolint:errcheck // read to the end

	return io.ReadAll(r)
})

// snapshotForTest returns the package's test snapshot: 50 keys at revision 51.
func snapshotForTest(t testing.TB) []byte {
	t.Helper()

	b, err := testSnapshot()
	if err != nil {
		t.Fatalf("taking the test snapshot from an embedded etcd: %v", err)
	}

	return b
}

// bytesSource streams b, as a Source.
func bytesSource(b []byte) Source {
	return SourceFunc(func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}
