package pvefake

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

// Defaults for the zero values of Options.
const (
	DefaultAddr    = "127.0.0.1:0"
	DefaultNode    = "pve1"
	DefaultVersion = "8.4.1"
	// DefaultTokenID and DefaultTokenSecret form the API token configured when Options.Tokens
	// and Options.Users are both empty: PROXMOX_VE_API_TOKEN=root@pam!lab=<secret>.
	DefaultTokenID     = "root@pam!lab"
	DefaultTokenSecret = "5e3c8f1a-7d2b-4c9e-a1f0-3b6d2e8c4a70"
	// DefaultFirstVMID is the lowest id cluster/nextid hands out (PVE's default lower bound).
	DefaultFirstVMID = 100
	// DefaultStorageBytes is the capacity reported for storages that name none.
	DefaultStorageBytes = 500 << 30
	// DefaultClusterName is the corosync cluster name of a fake with several nodes and no
	// Options.ClusterName.
	DefaultClusterName = "lab"
)

// Storage describes a datastore. Storages listed in Options.Storages exist once per node
// (like PVE's node-local "local" and "local-lvm"); Options.SharedStorages exist once and are
// visible from every node (like an NFS or Ceph datastore).
type Storage struct {
	// ID is the storage name, e.g. "local".
	ID string
	// Type is PVE's plugin type: "dir", "nfs", "cifs" (file based: volumes are files, downloads
	// allowed) or "lvmthin", "lvm", "zfspool", "rbd" (block based: VM images only).
	Type string
	// Content lists the content types: iso, import, vztmpl, snippets, images, rootdir, backup.
	Content []string
	// Path is the mount point of a file based storage (default /var/lib/vz for "local",
	// /mnt/pve/<id> otherwise). Only used in reported paths.
	Path string
	// TotalBytes is the reported capacity (default DefaultStorageBytes).
	TotalBytes int64
}

// DefaultStorages are the node-local storages of a fresh PVE install, with "import" enabled on
// "local" as the bpg provider's import_from needs.
func DefaultStorages() []Storage {
	return []Storage{
		{ID: "local", Type: "dir", Content: []string{"iso", "import", "vztmpl", "snippets"}},
		{ID: "local-lvm", Type: "lvmthin", Content: []string{"images", "rootdir"}},
	}
}

// Options configure a fake. The zero value is usable: one node "pve1" with DefaultStorages, the
// token DefaultTokenID=DefaultTokenSecret, no faults, no latency.
type Options struct {
	// Addr is the listen address; its host must lie in 127.0.0.0/8 (default 127.0.0.1:0).
	Addr string
	// Nodes are the cluster's node names (default ["pve1"]).
	Nodes []string
	// ClusterName is the name of the cluster the nodes form (pvecm create), as GET
	// /cluster/status reports it. Empty means DefaultClusterName when there are several nodes and
	// a standalone host (no cluster entry) when there is one.
	ClusterName string
	// NodeIPs maps node names to the address GET /cluster/status reports for them (default: the
	// fake's listen address for every node, since that address serves every node's API).
	NodeIPs map[string]string
	// Tokens maps API token ids ("user@realm!name") to their secrets. The secret must match
	// [A-Za-z0-9-]+ (bpg rejects anything else before sending).
	Tokens map[string]string
	// Users maps "user@realm" to a password for ticket logins (POST /access/ticket).
	Users map[string]string
	// Access seeds users, API tokens (with privilege separation), custom roles and ACLs.
	// Permissions are enforced as PVE enforces them for every user and token; root@pam and
	// its tokens without privilege separation (Tokens, DefaultTokenID) may do everything.
	Access *Access
	// Storages exist on every node (default DefaultStorages()).
	Storages []Storage
	// SharedStorages exist once and are visible on all nodes.
	SharedStorages []Storage
	// Pools are resource pools that exist from the start.
	Pools []string
	// PCIMappings are the cluster's PCI resource mappings (Datacenter → Resource Mappings), each
	// with an entry for every node.
	PCIMappings []string
	// Version is the PVE version reported by GET /version (default 8.4.1; import needs >= 8.4).
	Version string
	// FirstVMID is the lowest id cluster/nextid returns (default 100).
	FirstVMID int

	// Seed seeds the failure draw and generated identifiers (MACs, UUIDs).
	Seed uint64
	// FailureRate is the share of calls (0..1) that fail with a PVE-like 500/503 before any side
	// effect. Adjustable at runtime with SetFailureRate.
	FailureRate float64
	// Latency delays every call; on calls that start a task, the task stays "running" that long
	// instead. Adjustable at runtime with SetLatency.
	Latency time.Duration
	// RouteLatency overrides Latency per route rule (see SetRouteLatency for the rule syntax).
	RouteLatency map[string]time.Duration

	// Schema, when set, checks every request the fake routes and every JSON answer it gives
	// against PVE's API schema and collects the violations (SchemaViolations). It never changes
	// an answer. Every lab sets it (lab.Options.PVEVersion) and its e2e tests fail on a
	// violation; a fake started on its own checks nothing unless the environment variable
	// PVEFAKE_SCHEMA=<version> turns it on.
	Schema *pveschema.Schema

	// BridgeMTU is the MTU of each host bridge, the same on every node ("vmbr1": 9000); a bridge
	// not listed has DefaultBridgeMTU. A virtio NIC gets its bridge's MTU unless its mtu is set, and
	// a VM whose NIC's mtu exceeds its bridge's does not start (nor is such a NIC hot-plugged), with
	// qemu-server's error.
	BridgeMTU map[string]int

	// OnEvent receives VM lifecycle events, in order, on a goroutine of its own.
	OnEvent func(Event)
	// Logf, when set, receives one line per request and per state change (pass t.Logf in tests).
	Logf func(format string, args ...any)
}

var (
	nodeNameRE    = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$`)
	storageIDRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9\-_.]*[a-zA-Z0-9]$`)
	tokenIDRE     = regexp.MustCompile(`^\S+@\S+!\S+$`)
	tokenSecretRE = regexp.MustCompile(`^[a-zA-Z0-9-]+$`)
	loopbackNet   = netip.MustParsePrefix("127.0.0.0/8")
)

// normalize checks o and fills in defaults.
func (o Options) normalize() (Options, error) {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}

	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return o, fmt.Errorf("address %q: %w", o.Addr, err)
	}

	ip, err := netip.ParseAddr(host)
	if err != nil || !loopbackNet.Contains(ip) {
		return o, fmt.Errorf("address %q: the fake listens on 127.0.0.0/8 only", o.Addr)
	}

	if len(o.Nodes) == 0 {
		o.Nodes = []string{DefaultNode}
	}

	o.Nodes = slices.Clone(o.Nodes)
	for _, n := range o.Nodes {
		if !nodeNameRE.MatchString(n) {
			return o, fmt.Errorf("node name %q is not a valid PVE node name", n)
		}
	}

	if o.ClusterName == "" && len(o.Nodes) > 1 {
		o.ClusterName = DefaultClusterName
	}

	// POST /cluster/config's clustername: format pve-node, maxLength 15
	if o.ClusterName != "" && (!nodeNameRE.MatchString(o.ClusterName) || len(o.ClusterName) > 15) {
		return o, fmt.Errorf("cluster name %q is not a valid corosync cluster name", o.ClusterName)
	}

	for n, ip := range o.NodeIPs {
		if !slices.Contains(o.Nodes, n) {
			return o, fmt.Errorf("NodeIPs: %q is not a node", n)
		}

		if _, err := netip.ParseAddr(ip); err != nil {
			return o, fmt.Errorf("NodeIPs[%q]: %w", n, err)
		}
	}

	o.NodeIPs = maps.Clone(o.NodeIPs)

	if len(o.Tokens) == 0 && len(o.Users) == 0 {
		o.Tokens = map[string]string{DefaultTokenID: DefaultTokenSecret}
	}

	for id, secret := range o.Tokens {
		if !tokenIDRE.MatchString(id) || !tokenSecretRE.MatchString(secret) {
			return o, fmt.Errorf("token %q: want id user@realm!name and a secret of [A-Za-z0-9-]", id)
		}
	}

	if o.Storages == nil {
		o.Storages = DefaultStorages()
	}

	seen := map[string]bool{}
	for _, st := range append(slices.Clone(o.Storages), o.SharedStorages...) {
		if !storageIDRE.MatchString(st.ID) {
			return o, fmt.Errorf("storage id %q is not valid", st.ID)
		}

		if seen[st.ID] {
			return o, fmt.Errorf("storage id %q is defined twice", st.ID)
		}

		seen[st.ID] = true

		if _, ok := storagePlugins[st.Type]; !ok {
			return o, fmt.Errorf("storage %q: unknown type %q", st.ID, st.Type)
		}
	}

	if o.Version == "" {
		o.Version = DefaultVersion
	}

	if o.FirstVMID == 0 {
		o.FirstVMID = DefaultFirstVMID
	}

	if o.FailureRate < 0 || o.FailureRate > 1 {
		return o, errors.New("failure rate must lie between 0 and 1")
	}

	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}

	return o, nil
}
