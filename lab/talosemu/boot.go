package talosemu

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// boot is one life of the node's API between two reboots: a listener and the server on it.
type boot struct {
	gen  uint64
	lis  net.Listener
	srv  *grpc.Server // nil when the node hangs handshakes
	done chan struct{}
}

// stop closes the listener and ends the server, letting running calls finish for up to a second.
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

	b.lis.Close() //nolint:errcheck // already closed by the server, or closed here for the hang mode
	<-b.done
}

// bringUp opens the listener and serves the API; on success the node enters phase. A node that
// refuses connections never listens but still enters phase, so its state stays meaningful.
func (n *Node) bringUp(phase State) error {
	if n.opts.Unreachable == RefuseConnections {
		n.mu.Lock()
		defer n.mu.Unlock()

		if !n.closing {
			n.setPhaseLocked(phase)
		}

		return nil
	}

	lis, err := net.Listen("tcp", n.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", n.addr, err)
	}

	n.mu.Lock()
	defer n.mu.Unlock()

	if n.closing {
		lis.Close() //nolint:errcheck // never served

		return nil
	}

	b := &boot{gen: n.gen, lis: lis, done: make(chan struct{})}

	if n.opts.Unreachable == HangHandshake {
		go hang(lis, b.done)
	} else {
		b.srv = n.newServer(b.gen, phase == StateMaintenance)

		go func() {
			defer close(b.done)
			b.srv.Serve(lis) //nolint:errcheck // returns when stopped
		}()
	}

	n.boot = b
	n.bootedAt = time.Now()
	n.bootID = uuid.NewString()
	n.setPhaseLocked(phase)
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

// hang accepts connections and never answers them, until the listener is closed.
func hang(lis net.Listener, done chan<- struct{}) {
	defer close(done)

	var conns []net.Conn

	defer func() {
		for _, c := range conns {
			c.Close() //nolint:errcheck // best effort
		}
	}()

	for {
		c, err := lis.Accept()
		if err != nil {
			return
		}

		conns = append(conns, c)
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
