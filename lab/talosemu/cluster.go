package talosemu

import (
	"bytes"
	"hash/fnv"
	"net/netip"
	"slices"
	"sync"

	"github.com/siderolabs/crypto/x509"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Cluster is the registry the nodes of one emulated cluster share. It stands in for what real
// nodes learn from each other over the network: the etcd membership (who was bootstrapped, who
// joined), the OS CA key a worker's trustd request is signed with, and the addresses apid can
// proxy a `node` call to.
//
// Lock order: a Node may call into its Cluster while holding its own lock; the Cluster never calls
// a Node method while holding its own.
type Cluster struct {
	mu      sync.Mutex
	nodes   []*Node
	records map[*Node]nodeRecord
	members []etcdMember // join order; empty until a control plane is bootstrapped
	etcdCA  []byte       // etcd CA certificate of the running etcd cluster
	changed chan struct{}
}

// nodeRecord is what a node publishes about itself.
type nodeRecord struct {
	up           bool // serving its API in normal (configured) mode
	controlPlane bool
	etcdCA       []byte
	osCA         *x509.PEMEncodedCertificateAndKey
	hostname     string
	ip           netip.Addr
}

type etcdMember struct {
	node     *Node
	id       uint64
	hostname string
	ip       netip.Addr
}

// NewCluster returns an empty registry.
func NewCluster() *Cluster {
	return &Cluster{records: map[*Node]nodeRecord{}, changed: make(chan struct{})}
}

// Nodes lists the registered nodes in registration order.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()

	return slices.Clone(c.nodes)
}

// Bootstrapped reports whether etcd runs somewhere in the cluster.
func (c *Cluster) Bootstrapped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	return len(c.members) > 0
}

// EtcdMembers lists the hostnames of the etcd members in join order.
func (c *Cluster) EtcdMembers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()

	names := make([]string, 0, len(c.members))
	for _, m := range c.members {
		names = append(names, m.hostname)
	}

	return names
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

func (c *Cluster) unregister(n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.nodes = slices.DeleteFunc(c.nodes, func(o *Node) bool { return o == n })
	delete(c.records, n)
	c.leaveLocked(n)
	c.notifyLocked()
}

// update stores what n publishes; an up control plane joins a running, compatible etcd cluster.
func (c *Cluster) update(n *Node, rec nodeRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if _, ok := c.records[n]; !ok {
		return // closed
	}

	c.records[n] = rec
	c.joinReadyLocked()
	c.notifyLocked()
}

// bootstrap starts etcd on n, the way the Bootstrap API does on a real control plane.
func (c *Cluster) bootstrap(n *Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()

	if c.memberIndexLocked(n) >= 0 {
		return status.Error(codes.AlreadyExists, "etcd data directory is not empty")
	}

	if len(c.members) > 0 {
		return status.Error(codes.FailedPrecondition,
			"talosemu: this registry already runs an etcd cluster whose etcd CA differs from this node's cluster.etcd.ca")
	}

	rec := c.records[n]
	c.etcdCA = rec.etcdCA
	c.members = append(c.members, newMember(n, rec))
	c.joinReadyLocked()
	c.notifyLocked()

	return nil
}

// leave removes n from etcd (a reset or a closed node).
func (c *Cluster) leave(n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.leaveLocked(n)
	c.notifyLocked()
}

func (c *Cluster) leaveLocked(n *Node) {
	if i := c.memberIndexLocked(n); i >= 0 {
		c.members = slices.Delete(c.members, i, i+1)
	}

	if len(c.members) == 0 {
		c.etcdCA = nil
	}
}

func (c *Cluster) isMember(n *Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	return c.memberIndexLocked(n) >= 0
}

func (c *Cluster) etcdMembers() []etcdMember {
	c.mu.Lock()
	defer c.mu.Unlock()

	return slices.Clone(c.members)
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

// lookup finds the node a `node` metadata value names: its IP, IP:port or hostname.
func (c *Cluster) lookup(target string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()

	for _, n := range c.nodes {
		rec := c.records[n]
		if target == rec.ip.String() || target == n.Address() || (rec.hostname != "" && target == rec.hostname) {
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

func (c *Cluster) joinReadyLocked() {
	if len(c.members) == 0 {
		return
	}

	for _, n := range c.nodes {
		rec := c.records[n]
		if rec.up && rec.controlPlane && bytes.Equal(rec.etcdCA, c.etcdCA) && c.memberIndexLocked(n) < 0 {
			c.members = append(c.members, newMember(n, rec))
		}
	}
}

func (c *Cluster) memberIndexLocked(n *Node) int {
	return slices.IndexFunc(c.members, func(m etcdMember) bool { return m.node == n })
}

func newMember(n *Node, rec nodeRecord) etcdMember {
	h := fnv.New64a()
	h.Write([]byte(rec.hostname + "/" + rec.ip.String()))

	return etcdMember{node: n, id: h.Sum64(), hostname: rec.hostname, ip: rec.ip}
}
