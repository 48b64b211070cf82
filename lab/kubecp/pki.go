package kubecp

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	stdx509 "crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/siderolabs/crypto/x509"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// certLifetime is the lifetime of the certificates issued here: a lab cluster lives for a test
// run, but a long-lived demo must not see them expire.
const certLifetime = 365 * 24 * time.Hour

// The files a control plane keeps in its Dir, named as Talos names them in its static pods'
// secrets directories (internal/app/machined/pkg/controllers/k8s/control_plane_static_pod.go).
const (
	fileCA                   = "pki/ca.crt"
	fileCAKey                = "pki/ca.key"
	fileAPIServerCrt         = "pki/apiserver.crt"
	fileAPIServerKey         = "pki/apiserver.key"
	fileKubeletClientCrt     = "pki/apiserver-kubelet-client.crt"
	fileKubeletClientKey     = "pki/apiserver-kubelet-client.key"
	fileEtcdCA               = "pki/etcd-client-ca.crt"
	fileEtcdClientCrt        = "pki/etcd-client.crt"
	fileEtcdClientKey        = "pki/etcd-client.key"
	fileServiceAccountKey    = "pki/service-account.key"
	fileServiceAccountPub    = "pki/service-account.pub"
	fileAggregatorCA         = "pki/aggregator-ca.crt"
	fileFrontProxyCrt        = "pki/front-proxy-client.crt"
	fileFrontProxyKey        = "pki/front-proxy-client.key"
	fileAdminKubeconfig      = "admin.kubeconfig"
	fileControllerKubeconfig = "controller-manager.kubeconfig"
	fileSchedulerKubeconfig  = "scheduler.kubeconfig"
)

// Identities of the control plane's clients, as Talos issues them.
const (
	adminCN             = "admin"
	adminOrganization   = "system:masters"
	controllerManagerCN = "system:kube-controller-manager"
	schedulerCN         = "system:kube-scheduler"
	kubeletClientCN     = "apiserver-kubelet-client"
	etcdClientCN        = "kube-apiserver"
	frontProxyCN        = "front-proxy-client"
)

var (
	clientAuth = []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}
	serverAuth = []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageServerAuth}
)

// issue issues a certificate and key from ca.
func issue(ca *x509.PEMEncodedCertificateAndKey, what, cn string, orgs []string, ips []net.IP, dns []string,
	usage []stdx509.ExtKeyUsage,
) (*x509.PEMEncodedCertificateAndKey, error) {
	authority, err := x509.NewCertificateAuthorityFromCertificateAndKey(ca)
	if err != nil {
		return nil, fmt.Errorf("loading the CA for the %s certificate: %w", what, err)
	}

	opts := []x509.Option{
		x509.CommonName(cn), x509.IPAddresses(ips), x509.DNSNames(dns), x509.ExtKeyUsage(usage),
		x509.KeyUsage(stdx509.KeyUsageDigitalSignature | stdx509.KeyUsageKeyEncipherment),
		x509.NotBefore(time.Now().Add(-time.Minute)), x509.NotAfter(time.Now().Add(certLifetime)),
	}
	if len(orgs) > 0 {
		opts = append(opts, x509.Organization(orgs...))
	}

	kp, err := x509.NewKeyPair(authority, opts...)
	if err != nil {
		return nil, fmt.Errorf("issuing the %s certificate: %w", what, err)
	}

	return x509.NewCertificateAndKeyFromKeyPair(kp), nil
}

// serviceIPs is the first address of each service CIDR: the `kubernetes` service's cluster IP.
func serviceIPs(cidrs string) ([]net.IP, error) {
	var ips []net.IP

	for _, s := range strings.Split(cidrs, ",") {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("service CIDR: %w", err)
		}

		ips = append(ips, net.IP(prefix.Masked().Addr().Next().AsSlice()))
	}

	return ips, nil
}

// servingSANs are the apiserver certificate's names, as Talos' KubernetesCertSANs: the endpoint
// and advertised addresses, loopback, the in-cluster names and the first service IPs.
func servingSANs(o *Options, host string) ([]net.IP, []string, error) {
	ips := []net.IP{net.ParseIP(host), o.AdvertiseIP, net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	dns := []string{
		"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc." + o.DNSDomain,
	}

	svc, err := serviceIPs(o.ServiceCIDR)
	if err != nil {
		return nil, nil, err
	}

	ips = append(ips, svc...)

	for _, san := range o.SANs {
		if ip := net.ParseIP(san); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, san)
		}
	}

	return ips, dns, nil
}

// publicKeyPEM is the PKIX public key of the service account signing key (RSA or ECDSA; PKCS#1,
// SEC 1 or PKCS#8), which the apiserver verifies tokens with.
func publicKeyPEM(keyPEM []byte) ([]byte, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("service account key: no PEM block")
	}

	var (
		key any
		err error
	)

	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = stdx509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = stdx509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = stdx509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("service account key: unsupported PEM block %q", block.Type)
	}

	if err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}

	var pub crypto.PublicKey

	switch k := key.(type) {
	case *rsa.PrivateKey:
		pub = k.Public()
	case *ecdsa.PrivateKey:
		pub = k.Public()
	default:
		return nil, fmt.Errorf("service account key: %T is neither RSA nor ECDSA", key)
	}

	der, err := stdx509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("service account public key: %w", err)
	}

	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// kubeconfig is a kubeconfig for server with a client certificate.
func kubeconfig(server string, ca []byte, user string, cert *x509.PEMEncodedCertificateAndKey) ([]byte, error) {
	const name = "lab"

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert.Crt, ClientKeyData: cert.Key}
	cfg.Contexts[user+"@"+name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = user + "@" + name

	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s kubeconfig: %w", user, err)
	}

	return data, nil
}

// writePKI issues every certificate and kubeconfig of the control plane and writes them under
// o.Dir, keeping the admin identity for the lab's own clients.
func (cp *ControlPlane) writePKI(host string) error {
	o := &cp.opts
	files := map[string][]byte{fileCA: o.CA.Crt, fileCAKey: o.CA.Key, fileEtcdCA: o.EtcdCA.Crt}

	add := func(crt, key string, pair *x509.PEMEncodedCertificateAndKey) {
		files[crt], files[key] = pair.Crt, pair.Key
	}

	ips, dns, err := servingSANs(o, host)
	if err != nil {
		return err
	}

	serving, err := issue(o.CA, "apiserver serving", "kube-apiserver", []string{"kube-master"}, ips, dns, serverAuth)
	if err != nil {
		return err
	}

	add(fileAPIServerCrt, fileAPIServerKey, serving)

	kubeletClient, err := issue(o.CA, "kubelet client", kubeletClientCN, []string{adminOrganization}, nil, nil, clientAuth)
	if err != nil {
		return err
	}

	add(fileKubeletClientCrt, fileKubeletClientKey, kubeletClient)

	etcdClient, err := issue(o.EtcdCA, "etcd client", etcdClientCN, nil, nil, nil, clientAuth)
	if err != nil {
		return err
	}

	add(fileEtcdClientCrt, fileEtcdClientKey, etcdClient)

	pub, err := publicKeyPEM(o.ServiceAccountKey.Key)
	if err != nil {
		return err
	}

	files[fileServiceAccountKey], files[fileServiceAccountPub] = o.ServiceAccountKey.Key, pub

	if o.AggregatorCA != nil {
		frontProxy, err := issue(o.AggregatorCA, "front proxy client", frontProxyCN, nil, nil, nil, clientAuth)
		if err != nil {
			return err
		}

		files[fileAggregatorCA] = o.AggregatorCA.Crt
		add(fileFrontProxyCrt, fileFrontProxyKey, frontProxy)
	}

	server := "https://" + cp.endpoint

	for _, c := range []struct{ file, cn, org string }{
		{fileAdminKubeconfig, adminCN, adminOrganization},
		{fileControllerKubeconfig, controllerManagerCN, controllerManagerCN},
		{fileSchedulerKubeconfig, schedulerCN, schedulerCN},
	} {
		cert, err := issue(o.CA, c.cn+" client", c.cn, []string{c.org}, nil, nil, clientAuth)
		if err != nil {
			return err
		}

		if files[c.file], err = kubeconfig(server, o.CA.Crt, c.cn, cert); err != nil {
			return err
		}

		if c.cn == adminCN {
			cp.admin, cp.adminKubeconfig = cert, files[c.file]
		}
	}

	if err := os.MkdirAll(cp.path("pki"), 0o700); err != nil {
		return fmt.Errorf("creating the pki directory: %w", err)
	}

	for name, data := range files {
		if err := os.WriteFile(cp.path(name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}

	return nil
}
