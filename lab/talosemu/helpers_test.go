package talosemu_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// nextHost hands every test node its own loopback address (127.77.0.1, 127.77.0.2, …) so parallel
// tests, repeated runs (-count) and other packages' tests (which use 127.0.0.x) never compete for a port.
var hostCounter atomic.Int32

func nextHost() string {
	n := hostCounter.Add(1) - 1

	return fmt.Sprintf("127.77.%d.%d", n/250, n%250+1)
}

// newCluster is a registry whose etcd runs with short raft timings in a test directory.
func newCluster(t *testing.T) *talosemu.Cluster {
	t.Helper()

	c := talosemu.NewClusterWith(talosemu.ClusterOptions{Dir: t.TempDir(), FastEtcd: true, Logf: t.Logf})
	t.Cleanup(func() { c.Close() }) //nolint:errcheck // removes nothing: Dir is the test's

	return c
}

func sharedBundle(t *testing.T) *talosemu.Bundle {
	t.Helper()

	b, err := talosemu.SharedBundle()
	if err != nil {
		t.Fatalf("secrets bundle: %v", err)
	}

	return b
}

// startNode starts a node on a fresh address (unless opts names one) that stops with the test.
func startNode(t *testing.T, opts talosemu.Options) *talosemu.Node {
	t.Helper()

	if opts.Address == "" {
		opts.Address = nextHost()
	}

	opts.Logf = t.Logf

	if opts.Cluster == nil {
		opts.Cluster = newCluster(t)
	}

	n, err := talosemu.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start: %v", err)
	}

	t.Cleanup(func() { n.Close() }) //nolint:errcheck // never fails

	return n
}

// machineConfig generates a configuration of type typ named hostname, plus extra patches.
func machineConfig(t *testing.T, typ machine.Type, hostname string, patches ...string) []byte {
	t.Helper()

	all := append([]string{fmt.Sprintf("machine:\n  network:\n    hostname: %s\n", hostname)}, patches...)

	cfg, err := sharedBundle(t).MachineConfig(typ, all...)
	if err != nil {
		t.Fatalf("machine config: %v", err)
	}

	return cfg
}

// insecureClient is the maintenance-mode client of talosctl --insecure and of the Talos provider's probe.
func insecureClient(t *testing.T, n *talosemu.Node) *client.Client {
	t.Helper()

	c, err := client.New(t.Context(),
		client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), //nolint:gosec // maintenance mode
		client.WithEndpoints(n.IP()))
	if err != nil {
		t.Fatalf("insecure client: %v", err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	return c
}

// secureClient connects with the bundle's talosconfig (os:admin client certificate).
func secureClient(t *testing.T, n *talosemu.Node) *client.Client {
	t.Helper()

	c, err := client.New(t.Context(),
		client.WithConfig(sharedBundle(t).ClientConfig(n.IP())),
		client.WithEndpoints(n.IP()))
	if err != nil {
		t.Fatalf("secure client: %v", err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	return c
}

// nodeCtx addresses calls to n the way the Talos provider does (client.WithNode).
func nodeCtx(t *testing.T, n *talosemu.Node) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(client.WithNode(t.Context(), n.IP()), 10*time.Second)
	t.Cleanup(cancel)

	return ctx
}

// install applies cfg in maintenance mode and waits until the node serves mutual TLS.
func install(t *testing.T, n *talosemu.Node, cfg []byte) {
	t.Helper()

	_, err := insecureClient(t, n).ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{
		Data: cfg,
		Mode: machineapi.ApplyConfigurationRequest_AUTO,
	})
	if err != nil {
		t.Fatalf("apply in maintenance mode: %v", err)
	}

	waitState(t, n, talosemu.StateInstalled, talosemu.StateBootstrapped)
}

func waitState(t *testing.T, n *talosemu.Node, want ...talosemu.State) {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	if err := n.WaitState(ctx, want...); err != nil {
		t.Fatal(err)
	}
}

// wantCode fails unless err is a gRPC status with code.
func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()

	if got := status.Code(err); got != code {
		t.Fatalf("got %v (%v), want code %v", got, err, code)
	}
}
