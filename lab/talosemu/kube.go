package talosemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubecp"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosmanifests"
)

// KubeOptions turn on a cluster's Kubernetes: a real kube-apiserver, controller-manager and
// scheduler (lab/kubecp) on the cluster endpoint once etcd runs, backed by the cluster's etcd and
// serving its CA and service-account key; an emulated kubelet (lab/kubeletemu) on every booted
// node; and the bootstrap manifests applied as Talos applies them (lab/talosmanifests).
type KubeOptions struct {
	// Bin is the kube binary (tools/kube/build.sh).
	Bin string
	// NodeMonitorGracePeriod is how long a node without heartbeats stays Ready (default 8s).
	NodeMonitorGracePeriod time.Duration
	// Heartbeat is how often kubelets renew their lease (default 2s).
	Heartbeat time.Duration
	// HungPod, when it returns true for a pod being deleted, keeps that pod terminating forever
	// (a hung drain).
	HungPod HungPodFunc
	// OperatorCRDs maps a pod label selector to a directory of CRD manifests: once a pod it
	// selects runs, the CRDs are created, as an operator registers its own CRDs when it starts
	// (Cilium's operator: cilium.io CRDs that inline manifests' custom resources need).
	OperatorCRDs map[string]string
	// Containers stand in for the processes of chosen images in the pods the kubelets run
	// (kubeletemu.Options.Containers), by image repository.
	Containers map[string]kubeletemu.ContainerFunc
}

// kube is the cluster's Kubernetes side.
type kube struct {
	cp       *kubecp.ControlPlane
	client   kubernetes.Interface
	etcd     []string // the etcd endpoints the apiserver was started with
	endpoint string
	kubelets map[*Node]*runningKubelet
	applied  string // the manifests (as configured) last applied without error
	// operators are the OperatorCRDs selectors whose CRDs exist.
	operators map[string]bool
}

// Kubernetes is the admin kubeconfig of the cluster's API server, nil until it runs.
func (c *Cluster) Kubernetes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()

	if c.kube == nil || c.kube.cp == nil {
		return nil
	}

	return c.kube.cp.AdminKubeconfig()
}

// kubeLoop keeps the cluster's Kubernetes in line with its nodes until ctx ends.
func (c *Cluster) kubeLoop(ctx context.Context) {
	defer c.stopKube()

	for {
		ch := c.changedCh()
		c.reconcileKube(ctx)

		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-time.After(2 * time.Second):
		}
	}
}

// controlPlaneView is what reconcileKube needs to know, read under the lock.
type controlPlaneView struct {
	cfg      config.Config // an up control plane's configuration
	cpRec    nodeRecord    // that control plane
	version  string        // the Talos version that control plane runs
	running  []string      // running etcd members' client URLs
	all      []string      // every control plane's etcd client URL
	upNodes  map[*Node]nodeRecord
	apiStale bool // none of the apiserver's etcd endpoints runs a member any more
}

func (c *Cluster) viewLocked() controlPlaneView {
	v := controlPlaneView{running: c.clientURLsLocked(true), all: c.clientURLsLocked(false), upNodes: map[*Node]nodeRecord{}}

	for _, n := range c.nodes {
		rec := c.records[n]
		if !rec.up || rec.cfg == nil {
			continue
		}

		v.upNodes[n] = rec

		if e := c.etcd[n]; v.cfg == nil && rec.controlPlane && e != nil && e.member != nil {
			v.cfg, v.version, v.cpRec = rec.cfg, rec.version, rec
		}
	}

	if c.kube != nil && c.kube.cp != nil {
		v.apiStale = len(v.running) > 0 && !slices.ContainsFunc(c.kube.etcd, func(u string) bool { return slices.Contains(v.running, u) })
	}

	return v
}

func (c *Cluster) reconcileKube(ctx context.Context) {
	c.mu.Lock()
	v := c.viewLocked()
	k := c.kube
	c.mu.Unlock()

	if v.apiStale {
		// The API server's etcd members are all gone: the one on another control plane takes
		// over (as behind the VIP), pointed at the members that run.
		c.opts.Logf("talosemu: the API server's etcd members are gone; restarting it against %v", v.running)
		c.stopKube()

		c.mu.Lock()
		k = c.kube
		c.mu.Unlock()
	}

	if (k == nil || k.cp == nil) && v.cfg != nil {
		// An endpoint on a VIP answers once a control plane holds it (its link exists).
		if vip := endpointVIP(v.cfg); vip.IsValid() && c.vipHolder(vip) == nil {
			c.noteKubeError(fmt.Errorf("the cluster endpoint's VIP %s is held by no control plane (none has its link): "+
				"the API server is unreachable", vip))

			return
		}

		if err := c.startKube(ctx, v); err != nil {
			c.noteKubeError(err)

			return
		}
	}

	c.reconcileKubelets(ctx, v)
	c.applyNodeSpecs(ctx, v)
	c.applyManifests(ctx, v)
	c.runOperators(ctx)
}

// applyManifests creates what the control plane's manifests hold and does not exist yet, as
// Talos' manifest controller does: again whenever the configured manifests change (new objects
// only) and until a run succeeds.
func (c *Cluster) applyManifests(ctx context.Context, v controlPlaneView) {
	c.mu.Lock()
	k := c.kube
	c.mu.Unlock()

	if k == nil || k.cp == nil || v.cfg == nil {
		return
	}

	sig := manifestsSignature(v.cfg)
	if sig == k.applied {
		return
	}

	sources, err := talosmanifests.Manifests(ctx, v.cfg)
	if err == nil {
		var created []string

		created, err = talosmanifests.Apply(ctx, k.cp.RESTConfig(), sources, hasManifestInventory(v.version))
		for _, name := range created {
			c.opts.Logf("talosemu: created %s", name)
		}
	}

	if err != nil {
		c.noteKubeError(fmt.Errorf("applying manifests: %w", err))

		return
	}

	c.mu.Lock()
	k.applied = sig
	c.mu.Unlock()
}

// manifestsSignature changes whenever what Talos would apply changes.
func manifestsSignature(cfg config.Config) string {
	f := talosmanifests.FactsOf(cfg)
	parts := []string{f.CNI, fmt.Sprint(f.ProxyEnabled, f.CoreDNSEnabled, f.ProxyImage, f.CoreDNSImage)}

	for _, m := range f.External {
		parts = append(parts, m.Name, m.URL)
	}

	for _, m := range f.Inline {
		parts = append(parts, m.Name, m.Contents)
	}

	return strings.Join(parts, "\x00")
}

func (c *Cluster) noteKubeError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if msg := err.Error(); msg != c.kubeErr {
		c.kubeErr = msg
		c.opts.Logf("talosemu: Kubernetes: %v", err)
	}
}

// startKube starts the control plane on the configuration's endpoint.
func (c *Cluster) startKube(ctx context.Context, v controlPlaneView) error {
	endpoint, err := apiEndpoint(v.cfg)
	if err != nil {
		return err
	}

	c.mu.Lock()
	dir := filepath.Join(c.dirLocked(), "kube")
	c.mu.Unlock()

	facts := talosmanifests.FactsOf(v.cfg)
	ca, _ := kubernetesCA(v.cfg)

	// Talos gives the API server --advertise-address=$(POD_IP): the control plane's first node IP.
	var advertise net.IP
	if ips := kubeletNodeIPs(v.cfg, v.cpRec.addrs); len(ips) > 0 {
		advertise = ips[0].AsSlice()
	}

	var maskV4, maskV6 int
	if k := v.cfg.K8sNetworkConfig(); k != nil {
		maskV4, maskV6 = k.NodeCIDRMaskSizeIPv4(), k.NodeCIDRMaskSizeIPv6()
	}

	cp, err := kubecp.Start(ctx, kubecp.Options{
		Bin:                    c.opts.Kube.Bin,
		Dir:                    dir,
		Endpoint:               endpoint,
		AdvertiseIP:            advertise,
		NodeCIDRMaskSizeIPv4:   maskV4,
		NodeCIDRMaskSizeIPv6:   maskV6,
		SANs:                   apiServerCertSANs(v.cfg),
		CA:                     ca,
		AggregatorCA:           aggregatorCA(v.cfg),
		ServiceAccountKey:      serviceAccountKey(v.cfg),
		ServiceCIDR:            strings.Join(facts.ServiceCIDRs, ","),
		PodCIDR:                strings.Join(facts.PodCIDRs, ","),
		DNSDomain:              facts.DNSDomain,
		EtcdEndpoints:          v.all,
		EtcdCA:                 v.cfg.Cluster().Etcd().CA(),
		NodeMonitorGracePeriod: c.opts.Kube.NodeMonitorGracePeriod,
		Logf:                   c.opts.Logf,
	})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}

	// The kubelets of all nodes share this client: no client-side throttling (a real kubelet has
	// its own budget per node).
	rc := cp.RESTConfig()
	rc.QPS, rc.Burst = 500, 1000

	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		cp.Stop()

		return err
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.closed {
		go cp.Stop()

		return nil
	}

	if !c.hasControlPlaneLocked() {
		go cp.Kill() // the control plane machines went while it started

		return errors.New("the control plane machines went while its API server started")
	}

	c.kube = &kube{cp: cp, client: client, etcd: v.all, endpoint: endpoint, kubelets: map[*Node]*runningKubelet{}}
	c.notifyLocked()

	return nil
}

// stopKube stops the kubelets and the control plane.
func (c *Cluster) stopKube() {
	c.mu.Lock()
	k := c.kube
	c.kube = nil
	c.mu.Unlock()

	k.stop()
}

// stop stops k's kubelets and control plane (nothing when k is nil).
func (k *kube) stop() {
	if k == nil {
		return
	}

	for _, kl := range k.kubelets {
		kl.stop()
	}

	if k.cp != nil {
		k.cp.Kill() // the lab is going away, or the machines it ran on are: no graceful shutdown
	}
}

// apiEndpoint is host:port of cluster.controlPlane.endpoint, which must name a lab address
// (127.0.0.0/8 or LabIPv6Prefix); an IPv6 one is bracketed.
func apiEndpoint(cfg config.Config) (string, error) {
	u := clusterEndpoint(cfg)
	if u == nil {
		return "", fmt.Errorf("the configuration has no cluster.controlPlane.endpoint")
	}

	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "6443"
	}

	ip, err := netip.ParseAddr(host)
	if err != nil || !LabAddress(ip) {
		return "", fmt.Errorf("cluster.controlPlane.endpoint %s: the lab's API server listens on 127.0.0.0/8 and %s addresses only", u, LabIPv6Prefix)
	}

	return net.JoinHostPort(host, port), nil
}
