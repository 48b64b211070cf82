package talosemu

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ClusterOptions configure a Cluster.
type ClusterOptions struct {
	// Dir holds the etcd data of nodes without a SystemDisk (default: a temporary directory,
	// removed by Close).
	Dir string
	// FastEtcd runs etcd with short raft timings (50 ms ticks, 500 ms elections), for tests.
	FastEtcd bool
	// Kube, when set, runs the cluster's Kubernetes (see KubeOptions); without it no API server
	// or kubelet runs.
	Kube *KubeOptions
	// Logf receives one line per etcd event.
	Logf func(format string, args ...any)
}

// Cluster is the registry the nodes of one emulated cluster share. It stands in for what real
// nodes learn from each other over the network: the control planes' etcd members (real embedded
// etcd servers, see etcd.go), the OS CA key a worker's trustd request is signed with, and the
// addresses apid can proxy a `node` call to.
//
// Lock order: a Node may call into its Cluster while holding its own lock; the Cluster never calls
// a Node method while holding its own.
type Cluster struct {
	opts ClusterOptions

	mu      sync.Mutex
	nodes   []*Node
	records map[*Node]nodeRecord
	etcd    map[*Node]*nodeEtcd // control planes that ever ran an etcd member
	etcdCA  []byte              // etcd CA certificate of the bootstrapped cluster
	tmpDir  string              // created on demand when opts.Dir is empty
	seq     int                 // members started so far
	closed  bool
	changed chan struct{}
	// abandoned counts etcd members that did not stop within their bound (stopMember).
	abandoned atomic.Int64
	kube      *kube  // the cluster's Kubernetes; nil until it runs (and always without opts.Kube)
	kubeErr   string // the last Kubernetes error logged (each is logged once in a row)
	cancel    context.CancelFunc
	loopEnd   chan struct{} // closed when the Kubernetes loop has stopped everything
	log       eventLog
	vipOwners map[netip.Addr]*Node // who holds each VIP (vipHolder)
}

// nodeRecord is what a node publishes about itself.
type nodeRecord struct {
	up           bool // serving its API in normal (configured) mode
	controlPlane bool
	etcdCA       *x509.PEMEncodedCertificateAndKey
	osCA         *x509.PEMEncodedCertificateAndKey
	hostname     string
	ip           netip.Addr
	etcdPorts    [2]int // client, peer
	disk         *SystemDisk
	cfg          config.Config // the running configuration; nil in maintenance
	version      string        // the Talos version the node runs
	bootID       string        // the id of the node's current boot
	systemUUID   string        // the machine's SMBIOS system UUID ("": none)
	addrs        []netip.Addr  // the addresses the node holds (nodeAddresses)
	vips         []netip.Addr  // the VIPs its configuration puts on a link it has
}

// NewCluster returns an empty registry with default options.
func NewCluster() *Cluster { return NewClusterWith(ClusterOptions{}) }

// NewClusterWith returns an empty registry.
func NewClusterWith(opts ClusterOptions) *Cluster {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}

	c := &Cluster{
		opts: opts, records: map[*Node]nodeRecord{}, etcd: map[*Node]*nodeEtcd{}, changed: make(chan struct{}),
		vipOwners: map[netip.Addr]*Node{},
	}

	if opts.Kube != nil {
		var ctx context.Context
		ctx, c.cancel = context.WithCancel(context.Background())
		c.loopEnd = make(chan struct{})

		go func() {
			defer close(c.loopEnd)
			c.kubeLoop(ctx)
		}()
	}

	return c
}

// Close stops the cluster's Kubernetes and every etcd member still running (as a power cut
// would) and removes the temporary directory. Nodes should be closed first; Close is safe to call
// more than once.
func (c *Cluster) Close() error {
	if c.cancel != nil {
		c.cancel()
		<-c.loopEnd
	}

	c.mu.Lock()
	c.closed = true
	var running []*nodeEtcd
	for _, e := range c.etcd {
		if e.member != nil {
			running = append(running, e)
		}
	}
	dir := c.tmpDir
	c.mu.Unlock()

	for _, e := range running {
		e.member.HardStop()
	}

	if dir != "" {
		return os.RemoveAll(dir)
	}

	return nil
}

// Nodes lists the registered nodes in registration order.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()

	return slices.Clone(c.nodes)
}

func (c *Cluster) register(n *Node, rec nodeRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()

	for other, r := range c.records {
		if r.ip == rec.ip && other.opts.Port == n.opts.Port {
			return status.Errorf(codes.AlreadyExists, "another node of this cluster already uses %s", n.Address())
		}
	}

	c.nodes = append(c.nodes, n)
	c.records[n] = rec
	c.notifyLocked()

	return nil
}

// unregister forgets a node whose machine is gone (powered off or deleted): its etcd member stops
// without a goodbye and stays in the member list, as a real member of a lost machine does.
func (c *Cluster) unregister(n *Node) {
	c.mu.Lock()
	c.nodes = slices.DeleteFunc(c.nodes, func(o *Node) bool { return o == n })
	stopped := c.powerOffLocked(n)
	delete(c.records, n)
	k := c.takeKubeWithoutControlPlanesLocked()
	c.notifyLocked()
	c.mu.Unlock()

	// First, as its watches would hold the etcd member's graceful stop for seconds.
	k.stop()

	// The machine is off only once its etcd member stopped: its disk may be deleted next.
	<-stopped
}

// update stores what n publishes; an up control plane starts or joins etcd if the cluster runs it.
func (c *Cluster) update(n *Node, rec nodeRecord) {
	c.mu.Lock()

	if _, ok := c.records[n]; !ok {
		c.mu.Unlock()
		return // closed
	}

	was := c.records[n]
	c.records[n] = rec

	if was.up && !rec.up {
		c.stopLocked(n) // a reboot or reset: etcd stops gracefully
	}

	var k *kube
	if was.controlPlane && !rec.controlPlane {
		k = c.takeKubeWithoutControlPlanesLocked() // a reset wiped its configuration
	}

	c.startReadyLocked()
	c.notifyLocked()
	c.mu.Unlock()

	k.stop()
}

// takeKubeWithoutControlPlanesLocked takes the cluster's Kubernetes away, for kube.stop, once
// no machine holds a control plane's configuration (every one deleted or reset): its API server
// ran on them. It is not left to the reconcile loop, which may be waiting on that API server for
// a minute (its requests to an etcd that is gone); stopping it ends those waits too. Left
// running, it would keep the endpoint's address and answer a cluster created next on the same
// addresses with the old one's certificate.
func (c *Cluster) takeKubeWithoutControlPlanesLocked() *kube {
	if c.kube == nil || c.hasControlPlaneLocked() {
		return nil
	}

	k := c.kube
	c.kube = nil
	c.opts.Logf("talosemu: no control plane machine is left; the API server stops with them")

	return k
}

// hasControlPlaneLocked reports whether a machine of the cluster holds a control plane's
// configuration (up, or rebooting with it).
func (c *Cluster) hasControlPlaneLocked() bool {
	return slices.ContainsFunc(c.nodes, func(n *Node) bool { return c.records[n].controlPlane })
}

// osCAKey finds the OS CA with its key on an up control plane whose CA certificate is crt: what a
// worker's trustd request would be signed with.
func (c *Cluster) osCAKey(crt []byte) *x509.PEMEncodedCertificateAndKey {
	c.mu.Lock()
	defer c.mu.Unlock()

	for _, n := range c.nodes {
		rec := c.records[n]
		if rec.up && rec.controlPlane && rec.osCA != nil && len(rec.osCA.Key) > 0 && bytes.Equal(rec.osCA.Crt, crt) {
			return rec.osCA
		}
	}

	return nil
}

// lookup finds the node a `node` metadata value names: one of its addresses (with or without the
// port) or its hostname.
func (c *Cluster) lookup(target string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()

	for _, n := range c.nodes {
		rec := c.records[n]
		if target == rec.ip.String() || target == n.Address() || (rec.hostname != "" && target == rec.hostname) ||
			slices.ContainsFunc(rec.addrs, func(a netip.Addr) bool { return namesAddr(target, a, n.opts.Port) }) {
			return n
		}
	}

	return nil
}

// changedCh is closed at the next change of the registry.
func (c *Cluster) changedCh() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()

	return c.changed
}

func (c *Cluster) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
