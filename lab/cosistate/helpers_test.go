package cosistate_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/cosistate"
)

// serve runs st's COSI service on a real gRPC server with TLS on a free loopback port and returns
// Talos' machinery client connected to it (as talosctl would be, through apid).
func serve(t *testing.T, st *cosistate.State) *client.Client {
	t.Helper()

	cert, pool := selfSigned(t)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}

	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS13,
	})))

	desc, impl := st.Service()
	srv.RegisterService(desc, impl)

	go srv.Serve(lis) //nolint:errcheck // ends with Stop

	t.Cleanup(srv.Stop)

	c, err := client.New(t.Context(),
		client.WithEndpoints(lis.Addr().String()),
		client.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}),
	)
	if err != nil {
		t.Fatalf("client: %v", err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	return c
}

// selfSigned makes a server certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cosistate-test"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}

	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}

	pool := x509.NewCertPool()
	pool.AddCert(leaf)

	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// nextEvent waits for the next event on ch.
func nextEvent(t *testing.T, ch <-chan state.Event) state.Event {
	t.Helper()

	select {
	case ev := <-ch:
		if ev.Type == state.Errored {
			t.Fatalf("watch error: %v", ev.Error)
		}

		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")

		return state.Event{}
	}
}

func ctxTimeout(t *testing.T) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)

	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()

	if err != nil {
		t.Fatal(err)
	}
}
