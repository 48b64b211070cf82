// Package kubecp runs a real Kubernetes control plane for one emulated Talos cluster:
// kube-apiserver, kube-controller-manager and kube-scheduler of k8s.io/kubernetes (the `kube`
// binary of tools/kube), as child processes on the cluster's loopback address, backed by the
// cluster's etcd (lab/etcdmember) over mutual TLS.
//
// Certificates are issued from the cluster's own secrets (cluster.ca, cluster.aggregatorCA,
// cluster.serviceAccount and cluster.etcd.ca of the Talos machine configuration) and named as
// Talos names them; the apiserver runs with Talos' flags where they matter (Node,RBAC
// authorization, NodeRestriction, no anonymous requests, service account issuer = the cluster
// endpoint). There are no kubelets: nodes are API objects someone else keeps Ready.
package kubecp

import (
	"context"
	"crypto/tls"
	stdx509 "crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/siderolabs/crypto/x509"
	"k8s.io/client-go/rest"
)

// Options describe the control plane of one cluster.
type Options struct {
	// Bin is the path of the kube binary (tools/kube/build.sh).
	Bin string
	// Dir holds the certificates, kubeconfigs and the components' logs; it is created if needed.
	Dir string
	// Endpoint is host:port of the cluster endpoint (e.g. 127.0.0.9:6443 or [fd1a:b::9]:6443);
	// host must be an IP address. The apiserver listens there, and only there.
	Endpoint string
	// AdvertiseIP is the address the apiserver advertises (the `kubernetes` endpoints); it
	// defaults to the endpoint's address. Its family must be ServiceCIDR's first one, unless it
	// is a loopback address (the apiserver's own rule: the `kubernetes` service is single-stack).
	AdvertiseIP net.IP
	// SANs are extra names and addresses of the serving certificate (cluster.apiServer.certSANs).
	SANs []string
	// CA is the Kubernetes cluster CA with its key (cluster.ca): client CA of the apiserver,
	// issuer of its serving certificate and of every client certificate, and the
	// controller-manager's signer for certificate signing requests.
	CA *x509.PEMEncodedCertificateAndKey
	// AggregatorCA (cluster.aggregatorCA) is optional; with it, the apiserver gets the front
	// proxy (request header) configuration Talos gives it.
	AggregatorCA *x509.PEMEncodedCertificateAndKey
	// ServiceAccountKey is the service account signing key (cluster.serviceAccount.key), an RSA
	// or ECDSA private key in PEM.
	ServiceAccountKey *x509.PEMEncodedKey
	// ServiceCIDR is the service network, comma separated for dual stack (default 10.96.0.0/12).
	ServiceCIDR string
	// PodCIDR is the pod network the controller-manager allocates node CIDRs from (default
	// 10.244.0.0/16).
	PodCIDR string
	// NodeCIDRMaskSizeIPv4 and NodeCIDRMaskSizeIPv6 are the sizes of the pod CIDR each node gets
	// from PodCIDR's IPv4 and IPv6 networks (cluster.network's; 0: the controller-manager's
	// defaults, 24 and 64).
	NodeCIDRMaskSizeIPv4 int
	NodeCIDRMaskSizeIPv6 int
	// DNSDomain is the cluster's DNS domain (default cluster.local).
	DNSDomain string
	// EtcdEndpoints are the client URLs of the cluster's etcd (https://ip:2379).
	EtcdEndpoints []string
	// EtcdCA is the etcd CA with its key (cluster.etcd.ca); the apiserver's etcd client
	// certificate is issued from it.
	EtcdCA *x509.PEMEncodedCertificateAndKey
	// NodeMonitorGracePeriod is how long a node may go without a status or lease update before
	// the node lifecycle controller marks it NotReady (default 8s, for the lab; upstream's is
	// 40s). Whatever keeps nodes Ready must renew them more often than this.
	NodeMonitorGracePeriod time.Duration
	// PodEvictionTimeout is how long pods tolerate a NotReady or unreachable node before they
	// are evicted (the apiserver's default tolerations; default 30s, upstream's is 5 min).
	PodEvictionTimeout time.Duration
	// ReadyTimeout bounds how long Start waits for the apiserver (default 3 min).
	ReadyTimeout time.Duration
	// Logf, if set, receives progress and unexpected exits of the components.
	Logf func(format string, args ...any)
}

// settle is how long Start watches the controller-manager and the scheduler for an early exit.
const settle = 500 * time.Millisecond

// ControlPlane is a running control plane; Stop ends it.
type ControlPlane struct {
	opts            Options
	endpoint        string
	admin           *x509.PEMEncodedCertificateAndKey
	adminKubeconfig []byte
	procs           []*process // apiserver, controller-manager, scheduler
	stopOnce        sync.Once
	stopped         chan struct{}
}

// Start issues the control plane's certificates into o.Dir, starts the apiserver and, once its
// /readyz answers ok, the controller-manager and the scheduler. The components run until ctx
// ends or Stop is called, and die with this process. A failed start leaves nothing running and
// reports the end of the failing component's log.
func Start(ctx context.Context, o Options) (*ControlPlane, error) {
	host, err := o.setDefaults()
	if err != nil {
		return nil, err
	}

	cp := &ControlPlane{opts: o, endpoint: o.Endpoint, stopped: make(chan struct{})}

	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("kubecp: creating %s: %w", o.Dir, err)
	}

	if err := cp.writePKI(host); err != nil {
		return nil, fmt.Errorf("kubecp: %w", err)
	}

	begin := time.Now()

	if err := cp.start(ctx); err != nil {
		cp.Stop()
		return nil, fmt.Errorf("kubecp %s: %w", o.Endpoint, err)
	}

	cp.logf("control plane on %s ready in %s", o.Endpoint, time.Since(begin).Round(time.Millisecond))

	for _, p := range cp.procs {
		go cp.watch(p)
	}

	go func() {
		select {
		case <-ctx.Done():
			cp.Stop()
		case <-cp.stopped:
		}
	}()

	return cp, nil
}

// setDefaults validates o and fills in its defaults; it returns the endpoint's address.
func (o *Options) setDefaults() (string, error) {
	switch {
	case o.Bin == "":
		return "", errors.New("kubecp: no kube binary (Options.Bin)")
	case o.Dir == "":
		return "", errors.New("kubecp: no directory (Options.Dir)")
	case o.CA == nil || len(o.CA.Key) == 0:
		return "", errors.New("kubecp: the cluster CA with its key is required")
	case o.EtcdCA == nil || len(o.EtcdCA.Key) == 0:
		return "", errors.New("kubecp: the etcd CA with its key is required")
	case o.ServiceAccountKey == nil || len(o.ServiceAccountKey.Key) == 0:
		return "", errors.New("kubecp: the service account key is required")
	case len(o.EtcdEndpoints) == 0:
		return "", errors.New("kubecp: no etcd endpoints")
	case o.AggregatorCA != nil && len(o.AggregatorCA.Key) == 0:
		return "", errors.New("kubecp: the aggregator CA has no key")
	}

	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return "", fmt.Errorf("kubecp: %w", err)
	}

	o.Dir = dir

	host, port, err := net.SplitHostPort(o.Endpoint)
	if err != nil {
		return "", fmt.Errorf("kubecp: endpoint %q: %w", o.Endpoint, err)
	}

	if net.ParseIP(host) == nil {
		return "", fmt.Errorf("kubecp: endpoint %q: the host must be an IP address", o.Endpoint)
	}

	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("kubecp: endpoint %q: bad port", o.Endpoint)
	}

	if o.AdvertiseIP == nil {
		o.AdvertiseIP = net.ParseIP(host)
	}

	defaults := []struct {
		s   *string
		def string
	}{{&o.ServiceCIDR, "10.96.0.0/12"}, {&o.PodCIDR, "10.244.0.0/16"}, {&o.DNSDomain, "cluster.local"}}
	for _, d := range defaults {
		if *d.s == "" {
			*d.s = d.def
		}
	}

	if o.NodeMonitorGracePeriod <= 0 {
		o.NodeMonitorGracePeriod = 8 * time.Second
	}

	if o.PodEvictionTimeout <= 0 {
		o.PodEvictionTimeout = 30 * time.Second
	}

	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 3 * time.Minute
	}

	return host, nil
}

// start runs the apiserver, waits for it and then starts the other two components.
func (cp *ControlPlane) start(ctx context.Context) error {
	apiserver, err := cp.run("apiserver", cp.apiserverArgs())
	if err != nil {
		return err
	}

	waitCtx, cancel := context.WithTimeout(ctx, cp.opts.ReadyTimeout)
	defer cancel()

	if err := cp.waitReady(waitCtx, apiserver); err != nil {
		return err
	}

	// The controller-manager gives up when the apiserver is not healthy within 10 s of its
	// start: both start only now.
	if _, err := cp.run("controller-manager", cp.controllerManagerArgs()); err != nil {
		return err
	}

	if _, err := cp.run("scheduler", cp.schedulerArgs()); err != nil {
		return err
	}

	// Flag and configuration errors end a component within a fraction of a second: catch them
	// here, not later.
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		return fmt.Errorf("starting: %w", ctx.Err())
	}

	for _, p := range cp.procs {
		if !p.running() {
			return p.exitError()
		}
	}

	return nil
}

// run starts one component, logging to Dir/<component>.log.
func (cp *ControlPlane) run(component string, args []string) (*process, error) {
	p, err := startProcess(cp.opts.Bin, component, filepath.Join(cp.opts.Dir, component+".log"), args)
	if err != nil {
		return nil, err
	}

	cp.procs = append(cp.procs, p)
	cp.logf("kube %s started (pid %d)", component, p.cmd.Process.Pid)

	return p, nil
}

// watch reports a component that exits before Stop.
func (cp *ControlPlane) watch(p *process) {
	select {
	case <-p.done:
		select {
		case <-cp.stopped:
		default:
			cp.logf("kubecp %s: %v", cp.endpoint, p.exitError())
		}
	case <-cp.stopped:
	}
}

// waitReady polls the apiserver's /readyz as the admin until it answers ok, the apiserver exits
// or ctx ends.
func (cp *ControlPlane) waitReady(ctx context.Context, apiserver *process) error {
	client, err := cp.adminHTTPClient()
	if err != nil {
		return err
	}

	url := "https://" + cp.endpoint + "/readyz"

	var last string // what the last try got: every try sets it before the wait reads it

	for {
		if status, err := get(ctx, client, url); err != nil {
			last = err.Error()
		} else if status == http.StatusOK {
			return nil
		} else {
			last = "status " + strconv.Itoa(status)
		}

		select {
		case <-apiserver.done:
			return apiserver.exitError()
		case <-ctx.Done():
			return fmt.Errorf("the apiserver is not ready (%s): %w; last lines of %s:\n%s",
				last, ctx.Err(), apiserver.log, tail(apiserver.log, logTailLines))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}

	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}

	_ = resp.Body.Close()

	return resp.StatusCode, nil
}

// adminHTTPClient trusts the cluster CA and presents the admin certificate.
func (cp *ControlPlane) adminHTTPClient() (*http.Client, error) {
	cert, err := tls.X509KeyPair(cp.admin.Crt, cp.admin.Key)
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}

	pool := stdx509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.opts.CA.Crt) {
		return nil, errors.New("the cluster CA certificate does not parse")
	}

	transport := &http.Transport{
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}

	return &http.Client{Transport: transport, Timeout: 5 * time.Second}, nil
}

// Stop stops the components (SIGTERM, then SIGKILL after a grace period) and waits until they
// have exited. It may be called more than once.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		close(cp.stopped)

		var wg sync.WaitGroup
		for _, p := range cp.procs {
			wg.Add(1)

			go func() {
				defer wg.Done()
				p.stop()
			}()
		}

		wg.Wait()
	})
}

// Kill stops the components at once (SIGKILL), as a power cut does, and waits until they are
// gone. Stop and Kill may be called in any order, more than once.
func (cp *ControlPlane) Kill() {
	cp.stopOnce.Do(func() {
		close(cp.stopped)

		for _, p := range cp.procs {
			p.kill()
		}
	})
}

// Endpoint is the apiserver's host:port.
func (cp *ControlPlane) Endpoint() string { return cp.endpoint }

// AdminKubeconfig is a kubeconfig for the cluster endpoint with an admin client certificate
// (common name "admin", organization "system:masters") from the cluster CA.
func (cp *ControlPlane) AdminKubeconfig() []byte { return append([]byte(nil), cp.adminKubeconfig...) }

// RESTConfig is a client-go configuration with the admin identity of AdminKubeconfig.
func (cp *ControlPlane) RESTConfig() *rest.Config {
	return &rest.Config{
		Host: "https://" + cp.endpoint,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: cp.opts.CA.Crt, CertData: cp.admin.Crt, KeyData: cp.admin.Key,
		},
	}
}

func (cp *ControlPlane) logf(format string, args ...any) {
	if cp.opts.Logf != nil {
		cp.opts.Logf(format, args...)
	}
}
