package talosemu

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// boot is one life of the node's API between two reboots: the server and its listeners, one per
// address the node answers at (they come and go with the addresses its links hold).
type boot struct {
	gen  uint64
	port int
	srv  *grpc.Server // nil when the node hangs handshakes
	lis  map[netip.Addr]*trackedListener
	wg   sync.WaitGroup
}

// serve starts answering on lis (at ip).
func (b *boot) serve(ip netip.Addr, lis net.Listener) {
	tl := &trackedListener{Listener: lis, conns: map[net.Conn]bool{}}
	b.lis[ip] = tl
	b.wg.Add(1)

	go func() {
		defer b.wg.Done()

		if b.srv == nil {
			hang(tl)

			return
		}

		b.srv.Serve(tl) //nolint:errcheck // returns when stopped or when the address goes away
	}()
}

// drop stops answering at ip: its listener closes and so do the connections made to it (the
// address is gone from the node, so nothing reaches the node through it any more).
func (b *boot) drop(ip netip.Addr) {
	if tl := b.lis[ip]; tl != nil {
		delete(b.lis, ip)
		tl.Close() //nolint:errcheck // best effort
		tl.closeConns()
	}
}

// stop closes the listeners and ends the server, letting running calls finish for up to a second.
func (b *boot) stop() {
	if b.srv != nil {
		stopped := make(chan struct{})

		go func() {
			b.srv.GracefulStop()
			close(stopped)
		}()

		select {
		case <-stopped:
		case <-time.After(time.Second):
			b.srv.Stop()
			<-stopped
		}
	}

	for ip := range b.lis {
		b.drop(ip) // already closed by the server, or closed here for the hang mode
	}

	b.wg.Wait()
}

// trackedListener remembers the connections it accepted, to close them when its address goes.
type trackedListener struct {
	net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}

	l.mu.Lock()
	defer l.mu.Unlock()

	if l.closed {
		c.Close() //nolint:errcheck // the address went away meanwhile

		return nil, net.ErrClosed
	}

	l.conns[c] = true

	return &trackedConn{Conn: c, l: l}, nil
}

func (l *trackedListener) closeConns() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[net.Conn]bool{}
	l.mu.Unlock()

	for c := range conns {
		c.Close() //nolint:errcheck // best effort
	}
}

type trackedConn struct {
	net.Conn

	l *trackedListener
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c.Conn)
	c.l.mu.Unlock()

	return c.Conn.Close()
}

// bringUp opens the listeners and serves the API; on success the node enters phase. Listening at
// the node's own address (Options.Address) must work, if its links hold it; the other addresses
// are tried (listenLocked). A node that refuses connections never listens but still enters
// phase, so its state stays meaningful.
func (n *Node) bringUp(phase State) error {
	if n.opts.Unreachable == RefuseConnections {
		n.mu.Lock()
		defer n.mu.Unlock()

		if !n.closing {
			n.setPhaseLocked(phase)
		}

		return nil
	}

	n.mu.Lock()
	defer n.mu.Unlock()

	if n.closing {
		return nil
	}

	b := &boot{gen: n.gen, port: n.opts.Port, lis: map[netip.Addr]*trackedListener{}}

	if n.opts.Unreachable != HangHandshake {
		b.srv = n.newServer(b.gen, phase == StateMaintenance)
	}

	// The network of the boot to come: its configuration (nil in maintenance mode).
	cfg := n.active
	if phase == StateMaintenance {
		cfg = nil
	}

	if slices.Contains(n.listenAddrs(n.networkFor(cfg)), n.ip) {
		lis, err := listen(n.ip, n.opts.Port)
		if err != nil {
			return err
		}

		b.serve(n.ip, lis)
	}

	n.boot = b
	n.bootedAt = time.Now()
	n.bootID = uuid.NewString()
	n.setPhaseLocked(phase) // publishes the network and opens the other listeners
	n.Cluster().log.add(Event{Node: n.hostnameLocked(), Kind: "boot", Version: n.version})

	return nil
}

// newServer builds the gRPC server of one boot. Its TLS configuration is chosen per connection
// (through credentials.NewTLS, which keeps the h2 ALPN grpc-go clients require): maintenance boots
// present the self-signed certificate and ask for no client certificate; configured boots present
// a certificate from the OS CA and require a client certificate signed by it.
func (n *Node) newServer(gen uint64, maintenance bool) *grpc.Server {
	tlsCfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return n.tlsConfig(maintenance)
		},
	}

	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(tlsCfg)),
		grpc.ChainUnaryInterceptor(n.unaryInterceptor(gen)),
		grpc.ChainStreamInterceptor(n.streamInterceptor(gen)),
	)
	n.methods.register(srv)

	return srv
}

// takeDownLocked stops the API now (calls on the current boot are refused from here on) and
// starts the sequence that brings it back: wait delay, run then under the lock, come back up.
func (n *Node) takeDownLocked(during State, delay time.Duration, then func()) {
	if n.closing {
		return
	}

	n.gen++
	old := n.boot
	n.boot = nil
	n.Cluster().log.add(Event{Node: n.hostnameLocked(), Kind: "down", Version: n.version})
	n.stopTryTimerLocked()
	n.setPhaseLocked(during)

	n.wg.Add(1)

	go func() {
		defer n.wg.Done()

		if old != nil {
			old.stop()
		}

		if !sleepCtx(n.ctx, delay) {
			return
		}

		n.mu.Lock()
		then()
		n.bootStagedLocked()
		n.mu.Unlock()

		n.comeBack()
	}()
}

// comeBack brings the API up after a takedown. A configured node first needs its API
// certificate: a worker waits until a control plane of its cluster with the OS CA key is up.
func (n *Node) comeBack() {
	logged := false

	for {
		n.mu.Lock()

		if n.closing {
			n.mu.Unlock()

			return
		}

		phase, err := StateMaintenance, error(nil)

		if n.active != nil {
			phase = StateInstalled

			// The firmware, then the system volumes: a failure stops the boot sequence for good.
			why := n.bootFailure
			if why == "" {
				why = n.provisionFailure(n.active.cfg)
			}

			if why != "" {
				n.mu.Unlock()
				n.opts.Logf("talosemu %s: boot failed, the API stays down: %s", n.addr, why)

				return
			}

			var s *servingTLS
			if s, err = n.servingTLSLocked(); err == nil {
				n.serving = s
			}
		}

		clusterCh := n.Cluster().changedCh()
		n.mu.Unlock()

		if err == nil {
			if err = n.bringUp(phase); err == nil {
				return
			}
		}

		if !logged {
			n.opts.Logf("talosemu %s: API stays down: %v", n.addr, err)
			logged = true
		}

		wait := clusterCh
		if !errors.Is(err, errNoOSCAKey) {
			wait = nil // e.g. the address is taken: retry on a timer
		}

		select {
		case <-n.ctx.Done():
			return
		case <-wait:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// hang accepts connections and never answers them, until the listener is closed (which closes
// them).
func hang(lis net.Listener) {
	for {
		if _, err := lis.Accept(); err != nil {
			return
		}
	}
}

// sleepCtx waits d or until ctx ends; it reports whether the full wait happened.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}

	t := time.NewTimer(d)
	defer t.Stop()

	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
