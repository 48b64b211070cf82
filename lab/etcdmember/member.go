// Package etcdmember runs a real etcd member for an emulated Talos control plane: an embedded
// etcd server (go.etcd.io/etcd/server/v3 embed) on the node's loopback address, with peer and
// client mutual TLS from the cluster's etcd CA, certificates issued as Talos issues them
// (internal/pkg/etcd/certs.go). A member bootstraps a new cluster or joins a running one the way
// Talos' etcd service does (add as a learner, start, promote); a hard stop leaves it in the
// member list, as a powered-off VM does, and quorum loss is real. Restore writes a member's data
// directory from a snapshot with etcdutl's own restore, as a recovering Talos bootstrap does.
//
// The node emulator (lab/talosemu) runs one per control plane and answers Talos' etcd API from
// them; talos.md beside this file says how Talos answers each etcd RPC on top of it.
package etcdmember

import (
	"context"
	"crypto/tls"
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/crypto/x509"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config describes one member.
type Config struct {
	// Name is the member name: the node's hostname, as Talos uses it.
	Name string
	// IP is the node's address; the member listens on IP:ClientPort and IP:PeerPort.
	IP net.IP
	// ClientPort and PeerPort default to etcd's 2379 and 2380.
	ClientPort, PeerPort int
	// Dir holds the member's data (Dir/data) and certificates (Dir/pki).
	Dir string
	// CA is the cluster's etcd CA (cluster.etcd.ca of the machine configuration), with its key.
	CA *x509.PEMEncodedCertificateAndKey
	// Fast sets short raft timings (50 ms ticks, 500 ms elections) for tests.
	Fast bool
}

func (c Config) clientURL() string {
	return fmt.Sprintf("https://%s", net.JoinHostPort(c.IP.String(), port(c.ClientPort, 2379)))
}
func (c Config) peerURL() string {
	return fmt.Sprintf("https://%s", net.JoinHostPort(c.IP.String(), port(c.PeerPort, 2380)))
}

func port(p, def int) string {
	if p == 0 {
		p = def
	}

	return fmt.Sprint(p)
}

// Member is a running (or stopped) etcd member.
type Member struct {
	cfg   Config
	etcd  *embed.Etcd
	close sync.Once
	// ID is the member's etcd id.
	ID uint64
}

// Bootstrap starts a new one-member cluster, as Talos' Bootstrap API does on the first control
// plane. A data directory that already holds data is refused, as Talos refuses it.
func Bootstrap(ctx context.Context, cfg Config) (*Member, error) {
	if entries, err := os.ReadDir(filepath.Join(cfg.Dir, "data")); err == nil && len(entries) > 0 {
		return nil, errors.New("etcd data directory is not empty")
	}

	return start(ctx, cfg, embed.ClusterStateFlagNew, cfg.Name+"="+cfg.peerURL())
}

// Join adds cfg as a learner through a running member's client endpoints, starts it and promotes
// it to a voting member, as Talos' etcd service does for every control plane but the first.
func Join(ctx context.Context, cfg Config, endpoints []string) (*Member, error) {
	c, err := NewClient(cfg.CA, endpoints...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()

	// etcd refuses membership changes ("unhealthy cluster") until its leader has been connected
	// to a quorum for 5 s, allows one learner at a time, and a call may stall while the members
	// elect a leader. Talos' etcd service retries all of that, and so does this: every attempt is
	// bounded, and the last error is reported if the join runs out of time.
	var add *clientv3.MemberAddResponse

	for {
		if add, err = addLearner(ctx, c, cfg); err == nil {
			break
		}

		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("adding %s as a learner: %w (last attempt: %w)", cfg.Name, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}

	var initial []string

	for _, m := range add.Members {
		name := m.Name
		if m.ID == add.Member.ID {
			name = cfg.Name
		}

		for _, u := range m.PeerURLs {
			initial = append(initial, name+"="+u)
		}
	}

	m, err := start(ctx, cfg, embed.ClusterStateFlagExisting, strings.Join(initial, ","))
	if err != nil {
		return nil, err
	}

	for {
		if _, err = c.MemberPromote(ctx, add.Member.ID); err == nil {
			return m, nil
		}

		select {
		case <-ctx.Done():
			// Never hand back a running member with an error: nobody would stop it, and it would
			// outlive its data directory (etcd then exits the process: "failed to purge wal file").
			m.HardStop()

			return nil, fmt.Errorf("promoting %s: %w", cfg.Name, errors.Join(err, ctx.Err()))
		case <-time.After(20 * time.Millisecond): // a learner is promoted once it caught up
		}
	}
}

// joinAttempt bounds one attempt to add a learner: a call that stalls (no leader yet) is
// abandoned and tried again.
const joinAttempt = 5 * time.Second

func addLearner(ctx context.Context, c *clientv3.Client, cfg Config) (*clientv3.MemberAddResponse, error) {
	actx, cancel := context.WithTimeout(ctx, joinAttempt)
	defer cancel()

	if err := removeStale(actx, c, cfg); err != nil {
		return nil, err
	}

	return c.MemberAddAsLearner(clientv3.WithRequireLeader(actx), []string{cfg.peerURL()})
}

// removeStale removes what would conflict with the new member, as Talos' etcd service does before
// it joins with an empty data directory: a member with the same name (this node's former self).
// It also removes a member added with this peer URL that never started (a join that failed
// half-way), which would otherwise block every later join ("Peer URLs already exists").
func removeStale(ctx context.Context, c *clientv3.Client, cfg Config) error {
	list, err := c.MemberList(clientv3.WithRequireLeader(ctx))
	if err != nil {
		return err
	}

	for _, m := range list.Members {
		stale := m.Name == cfg.Name || (m.Name == "" && slices.Contains(m.PeerURLs, cfg.peerURL()))
		if !stale {
			continue
		}

		if _, err := c.MemberRemove(clientv3.WithRequireLeader(ctx), m.ID); err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) {
			return fmt.Errorf("removing the stale member %x: %w", m.ID, err)
		}
	}

	return nil
}

// Restart starts a stopped member again from its data directory (a node that rebooted). It
// returns once the member is ready, which needs a quorum; a member not ready when ctx ends is
// stopped (as a power cut would) before Restart returns, and so is one that fails to start (this
// holds for Bootstrap and Join too).
func Restart(ctx context.Context, cfg Config) (*Member, error) {
	return start(ctx, cfg, embed.ClusterStateFlagExisting, "")
}

// ClientURL is the member's client endpoint.
func (m *Member) ClientURL() string { return m.cfg.clientURL() }

// HardStop stops the member as a power cut does: no leadership transfer, no goodbye. It stays in
// the cluster's member list; its data directory is kept.
func (m *Member) HardStop() {
	m.close.Do(func() {
		m.etcd.Server.HardStop()
		m.etcd.Close()
	})
}

// Stop stops the member gracefully (handing leadership over first), as a reboot does. Stopping
// a stopped member does nothing.
func (m *Member) Stop() { m.close.Do(m.etcd.Close) }

// Stopped is closed once the member's server has stopped (e.g. after it was removed from the
// cluster).
func (m *Member) Stopped() <-chan struct{} { return m.etcd.Server.StopNotify() }

// Wipe deletes the member's data directory (a reset of the node's EPHEMERAL partition).
func (m *Member) Wipe() error { return os.RemoveAll(filepath.Join(m.cfg.Dir, "data")) }

func start(ctx context.Context, cfg Config, state, initialCluster string) (*Member, error) {
	pki := filepath.Join(cfg.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return nil, err
	}

	files, err := writeCerts(pki, cfg)
	if err != nil {
		return nil, err
	}

	peer, _ := url.Parse(cfg.peerURL())
	client, _ := url.Parse(cfg.clientURL())

	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = filepath.Join(cfg.Dir, "data")
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	ec.InitialClusterToken = "talosemu"
	ec.ClusterState = state

	if initialCluster != "" {
		ec.InitialCluster = initialCluster
	}

	ec.ClientTLSInfo = transport.TLSInfo{CertFile: files.serverCrt, KeyFile: files.serverKey, TrustedCAFile: files.ca, ClientCertAuth: true}
	// Peers dial from 127.0.0.1 (the kernel's source address on 127/8), not from their node's
	// 127.x address: the peer certificate's addresses cannot match the source here.
	ec.PeerTLSInfo = transport.TLSInfo{
		CertFile: files.peerCrt, KeyFile: files.peerKey, TrustedCAFile: files.ca, ClientCertAuth: true, SkipClientSANVerify: true,
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(errorLogger(cfg.Name))
	ec.QuotaBackendBytes = 64 << 20 // also keeps bbolt's memory map small
	ec.UnsafeNoFsync = true
	ec.EnableGRPCGateway = false

	if cfg.Fast {
		ec.TickMs, ec.ElectionMs = 50, 500
	}

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("starting etcd member %s: %w", cfg.Name, err)
	}

	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		abort(e)
		return nil, fmt.Errorf("etcd member %s: %w", cfg.Name, err)
	case <-ctx.Done():
		abort(e)
		return nil, fmt.Errorf("etcd member %s not ready: %w", cfg.Name, ctx.Err())
	}

	return &Member{cfg: cfg, etcd: e, ID: uint64(e.Server.MemberID())}, nil
}

// abort stops a server that never became ready (e.g. it waits for a quorum that is gone), as a
// power cut would. embed's Close alone would block forever: it first waits for its client
// servers (embed/etcd.go, the range over serveCtx.serversC), each of which waits until the server
// is ready or stopping (embed/serve.go), and it stops the server only after that
// (etcd-io/etcd#9533). Stopping the server first, as etcd's TestEmbedEtcdStopDuringBootstrapping
// does, lets Close finish.
func abort(e *embed.Etcd) {
	e.Server.HardStop()
	e.Close()
}

type certFiles struct{ ca, serverCrt, serverKey, peerCrt, peerKey string }

// writeCerts issues the member's server and peer certificates from the etcd CA, as Talos does:
// server for the node's address, localhost and the hostname; peer for the node's address.
func writeCerts(dir string, cfg Config) (certFiles, error) {
	both := []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth, stdx509.ExtKeyUsageClientAuth}

	server, err := issue(cfg.CA, cfg.Name, []net.IP{cfg.IP, net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, []string{cfg.Name, "localhost"}, both)
	if err != nil {
		return certFiles{}, err
	}

	peer, err := issue(cfg.CA, cfg.Name, []net.IP{cfg.IP}, []string{cfg.Name}, both)
	if err != nil {
		return certFiles{}, err
	}

	f := certFiles{
		ca: filepath.Join(dir, "ca.crt"), serverCrt: filepath.Join(dir, "server.crt"), serverKey: filepath.Join(dir, "server.key"),
		peerCrt: filepath.Join(dir, "peer.crt"), peerKey: filepath.Join(dir, "peer.key"),
	}

	for path, data := range map[string][]byte{
		f.ca: cfg.CA.Crt, f.serverCrt: server.Crt, f.serverKey: server.Key, f.peerCrt: peer.Crt, f.peerKey: peer.Key,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return certFiles{}, err
		}
	}

	return f, nil
}

func issue(ca *x509.PEMEncodedCertificateAndKey, cn string, ips []net.IP, dns []string, usage []stdx509.ExtKeyUsage) (*x509.PEMEncodedCertificateAndKey, error) {
	authority, err := x509.NewCertificateAuthorityFromCertificateAndKey(ca)
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}

	kp, err := x509.NewKeyPair(authority,
		x509.NotAfter(time.Now().Add(87600*time.Hour)),
		x509.KeyUsage(stdx509.KeyUsageDigitalSignature|stdx509.KeyUsageKeyEncipherment),
		x509.CommonName(cn), x509.DNSNames(dns), x509.IPAddresses(ips), x509.ExtKeyUsage(usage),
	)
	if err != nil {
		return nil, fmt.Errorf("issuing %s's etcd certificate: %w", cn, err)
	}

	return x509.NewCertificateAndKeyFromKeyPair(kp), nil
}

// NewClient is an etcd client with Talos' admin identity (a client certificate with common name
// "talos" from the etcd CA).
func NewClient(ca *x509.PEMEncodedCertificateAndKey, endpoints ...string) (*clientv3.Client, error) {
	admin, err := issue(ca, "talos", nil, nil, []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, err
	}

	cert, err := tls.X509KeyPair(admin.Crt, admin.Key)
	if err != nil {
		return nil, err
	}

	pool := stdx509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.Crt) {
		return nil, errors.New("the etcd CA certificate does not parse")
	}

	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: pool}

	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
}

// Leave removes member id through endpoints, retrying while etcd refuses membership changes
// ("unhealthy cluster", within 5 s of a change) or the server is stopping, as Talos'
// EtcdLeaveCluster does; a member already gone counts as removed.
func Leave(ctx context.Context, c *clientv3.Client, id uint64) error {
	for {
		_, err := c.MemberRemove(clientv3.WithRequireLeader(ctx), id)

		switch {
		case err == nil, errors.Is(err, rpctypes.ErrMemberNotFound):
			return nil
		case !errors.Is(err, rpctypes.ErrUnhealthy) && !errors.Is(err, rpctypes.ErrStopped):
			return fmt.Errorf("removing member %x: %w", id, err)
		}

		select {
		case <-ctx.Done():
			return fmt.Errorf("removing member %x: %w", id, errors.Join(err, ctx.Err()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errorLogger keeps etcd quiet except for panics and fatal errors, which go to stderr: etcd ends
// the process on fatal conditions, and that must not happen silently. (Its errors are routine
// here: every stop logs closed listeners.)
func errorLogger(name string) *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())

	return zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.DPanicLevel)).Named("etcd " + name)
}
