package talosemu

import (
	"crypto/tls"
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/siderolabs/crypto/x509"
)

// errNoOSCAKey means a node's configuration carries the OS CA certificate without its key (a
// worker's) and no control plane of its cluster that has the key is up to sign for it.
var errNoOSCAKey = errors.New("no control plane with the OS CA key is up to issue the API certificate (trustd)")

// servingTLS is the mutual-TLS material of a configured node.
type servingTLS struct {
	cert      tls.Certificate
	clientCAs *stdx509.CertPool
}

// maintenanceCertificate is the certificate a node presents before it has a configuration: issued
// by a throw-away CA, for the node's IP and hostname. Clients do not verify it (InsecureSkipVerify).
func maintenanceCertificate(ip netip.Addr, hostname string) (tls.Certificate, error) {
	ca, err := x509.NewSelfSignedCertificateAuthority(x509.Organization("talos-maintenance"))
	if err != nil {
		return tls.Certificate{}, err
	}

	kp, err := x509.NewKeyPair(ca,
		x509.CommonName(hostname),
		x509.IPAddresses([]net.IP{ip.AsSlice()}),
		x509.DNSNames([]string{hostname}),
		x509.ExtKeyUsage([]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth}),
	)
	if err != nil {
		return tls.Certificate{}, err
	}

	return *kp.Certificate, nil
}

// servingTLSLocked issues the API certificate of the active configuration, as apid gets it: signed
// by the OS CA (machine.ca) for the node's addresses, hostname and machine.certSANs. Client certificates
// must chain to the OS CA or to one of machine.acceptedCAs.
func (n *Node) servingTLSLocked() (*servingTLS, error) {
	sec := n.active.cfg.Machine().Security()

	ca := sec.IssuingCA()
	if ca == nil || len(ca.Crt) == 0 {
		return nil, errors.New("the configuration has no machine.ca")
	}

	if len(ca.Key) == 0 {
		if ca = n.Cluster().osCAKey(ca.Crt); ca == nil {
			return nil, errNoOSCAKey
		}
	}

	authority, err := x509.NewCertificateAuthorityFromCertificateAndKey(ca)
	if err != nil {
		return nil, fmt.Errorf("loading machine.ca: %w", err)
	}

	hostname := n.hostnameLocked()
	ips := []net.IP{n.ip.AsSlice()}
	names := []string{hostname}

	// apid's certificate names every address the node holds (a dual-stack node's both).
	for _, a := range n.nodeAddresses(n.networkFor(n.active)) {
		if a != n.ip {
			ips = append(ips, a.AsSlice())
		}
	}

	for _, san := range sec.CertSANs() {
		if ip := net.ParseIP(san); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, san)
		}
	}

	kp, err := x509.NewKeyPair(authority,
		x509.CommonName(hostname),
		x509.IPAddresses(ips),
		x509.DNSNames(names),
		x509.ExtKeyUsage([]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth}),
	)
	if err != nil {
		return nil, fmt.Errorf("issuing the API certificate: %w", err)
	}

	pool := stdx509.NewCertPool()
	pool.AppendCertsFromPEM(ca.Crt)

	for _, accepted := range sec.AcceptedCAs() {
		pool.AppendCertsFromPEM(accepted.Crt)
	}

	return &servingTLS{cert: *kp.Certificate, clientCAs: pool}, nil
}

// tlsConfig is the server TLS configuration for one new connection.
func (n *Node) tlsConfig(maintenance bool) (*tls.Config, error) {
	if maintenance {
		return &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{n.maintCert},
			ClientAuth:   tls.NoClientCert,
		}, nil
	}

	n.mu.Lock()
	s := n.serving
	n.mu.Unlock()

	if s == nil {
		return nil, errors.New("talosemu: no API certificate yet")
	}

	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{s.cert},
		ClientCAs:    s.clientCAs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}
