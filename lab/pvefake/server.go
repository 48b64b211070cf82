package pvefake

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

// Server is a running Proxmox VE API fake.
type Server struct {
	opts    Options
	url     string
	certPEM []byte
	srv     *http.Server
	done    chan struct{}
	closing sync.Once
	secret  []byte // signs tickets and CSRF tokens

	faults *faults
	events *eventQueue
	fetch  *fetcher
	routes []route
	schema *schemaChecker // nil unless Options.Schema or PVEFAKE_SCHEMA
	// permSchema holds the "permissions" of every method (Options.Schema or the version's).
	permSchema *pveschema.Schema

	mu        sync.Mutex
	nodes     []string
	storages  map[string]*storage // key: storageKey(node, id); shared storages under "*"
	vms       map[int]*vm
	pools     map[string]*pool
	tasks     map[string]*task
	guestAddr map[int]guestAddress
	calls     map[string]int
	denied    []string // every 403 answered: "<METHOD> <path>: <message>"
	access    *accessState
	counter   uint64 // feeds generated ids
	taskPID   int
	closed    bool
	wg        sync.WaitGroup // delayed tasks
}

// Start listens on opts.Addr and serves until ctx ends or Close is called.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, err
	}

	cert, certPEM, err := selfSignedCertificate(ln.Addr().(*net.TCPAddr).IP)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}

	if opts.NodeIPs == nil {
		opts.NodeIPs = map[string]string{}
	}

	for _, n := range opts.Nodes {
		if opts.NodeIPs[n] == "" {
			opts.NodeIPs[n] = ln.Addr().(*net.TCPAddr).IP.String()
		}
	}

	secret := make([]byte, 32)
	_, _ = rand.Read(secret)

	s := &Server{
		opts:      opts,
		url:       "https://" + ln.Addr().String(),
		certPEM:   certPEM,
		done:      make(chan struct{}),
		secret:    secret,
		faults:    newFaults(opts),
		events:    newEventQueue(opts.OnEvent),
		fetch:     newFetchClient(),
		nodes:     opts.Nodes,
		storages:  map[string]*storage{},
		vms:       map[int]*vm{},
		pools:     map[string]*pool{},
		tasks:     map[string]*task{},
		guestAddr: map[int]guestAddress{},
		calls:     map[string]int{},
		taskPID:   0x2a3f0,
	}
	s.routes = s.routeTable()

	if s.access, err = newAccess(opts); err != nil {
		_ = ln.Close()
		return nil, err
	}

	if s.permSchema, err = permSchema(opts); err != nil {
		_ = ln.Close()
		return nil, err
	}

	if s.schema, err = newSchemaChecker(opts); err != nil {
		_ = ln.Close()
		return nil, err
	}

	for _, node := range opts.Nodes {
		for _, st := range opts.Storages {
			s.storages[storageKey(node, st.ID)] = newStorage(st, false)
		}
	}

	for _, st := range opts.SharedStorages {
		s.storages[storageKey("*", st.ID)] = newStorage(st, true)
	}

	for _, p := range opts.Pools {
		s.pools[p] = &pool{id: p}
	}

	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		// PVE's API daemon speaks HTTP/1.1 only; an empty map turns HTTP/2 off.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
		},
		ErrorLog: log.New(logWriter(opts.Logf), "pvefake: http: ", 0),
	}

	go func() {
		defer close(s.done)
		_ = s.srv.Serve(tls.NewListener(ln, s.srv.TLSConfig))
	}()

	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()

	opts.Logf("pvefake: serving PVE %s API for nodes %v at %s", opts.Version, opts.Nodes, s.url)

	return s, nil
}

// URL is the endpoint for clients, e.g. https://127.0.0.1:41234 (PROXMOX_VE_ENDPOINT).
func (s *Server) URL() string { return s.url }

// CertificatePEM is the server's self-signed certificate, for clients that verify it.
func (s *Server) CertificatePEM() []byte { return append([]byte(nil), s.certPEM...) }

// APIToken is the value of a configured token for PROXMOX_VE_API_TOKEN ("user@realm!name=secret"):
// the default token if configured, else the first by id. It is empty when only users exist.
func (s *Server) APIToken() string {
	if secret, ok := s.opts.Tokens[DefaultTokenID]; ok {
		return DefaultTokenID + "=" + secret
	}

	ids := make([]string, 0, len(s.opts.Tokens))
	for id := range s.opts.Tokens {
		ids = append(ids, id)
	}

	sort.Strings(ids)

	if len(ids) == 0 {
		return ""
	}

	return ids[0] + "=" + s.opts.Tokens[ids[0]]
}

// Close stops the server, abandons running tasks and drains the event queue.
func (s *Server) Close() error {
	var err error

	s.closing.Do(func() {
		err = s.srv.Close()
		<-s.done

		s.mu.Lock()
		s.closed = true
		for _, t := range s.tasks {
			if t.timer != nil && t.timer.Stop() {
				s.wg.Done()
			}
		}
		s.mu.Unlock()

		s.wg.Wait()
		s.events.close()

		if s.schema != nil {
			s.schema.summary()
		}

		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	})

	return err
}

func selfSignedCertificate(ip net.IP) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}

	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "pvefake", Organization: []string{"PVE Cluster Node"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip, net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("creating the self-signed certificate: %w", err)
	}

	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, _ := x509.MarshalECPrivateKey(key)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})

	cert, err := tls.X509KeyPair(certPEM, keyPEM)

	return cert, certPEM, err
}

// nextCounter returns a fresh number for generated identifiers. Callers hold s.mu.
func (s *Server) nextCounter() uint64 {
	s.counter++
	return s.counter
}

// logWriter turns Logf into an io.Writer for the HTTP server's error log.
type logWriter func(format string, args ...any)

func (l logWriter) Write(p []byte) (int, error) {
	l("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
