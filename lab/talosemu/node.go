package talosemu

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/config"
)

// State is where a node is in its life.
type State int

const (
	// StateMaintenance means no configuration; TLS without client certificates; Disks and
	// ApplyConfiguration work.
	StateMaintenance State = iota
	// StateInstalling means a configuration was accepted; the API is down while the node installs and
	// reboots (and, for a worker, until a control plane's OS CA can sign its API certificate).
	StateInstalling
	// StateInstalled means configured and serving mutual TLS; etcd not running on this node.
	StateInstalled
	// StateBootstrapped means a configured control plane whose etcd runs, because it was bootstrapped or
	// because it joined the cluster another control plane was bootstrapped in.
	StateBootstrapped
	// StateRebooting means the API is down for a reboot or a reset.
	StateRebooting
	// StateClosed means Close was called or the context given to Start ended.
	StateClosed
)

// String returns the lower-case name of the state.
func (s State) String() string {
	switch s {
	case StateMaintenance:
		return "maintenance"
	case StateInstalling:
		return "installing"
	case StateInstalled:
		return "installed"
	case StateBootstrapped:
		return "bootstrapped"
	case StateRebooting:
		return "rebooting"
	case StateClosed:
		return "closed"
	default:
		return "state(" + strconv.Itoa(int(s)) + ")"
	}
}

// appliedConfig is a machine configuration as applied and as loaded by the machinery.
type appliedConfig struct {
	raw []byte
	cfg config.Provider
}

// Node is one emulated Talos node: a gRPC server on a loopback address serving the Talos
// MachineService and StorageService the way apid and machined do.
type Node struct {
	opts       Options
	ip         netip.Addr
	addr       string
	cluster    atomic.Pointer[Cluster] // moves once, at the first configuration (Options.Join)
	ctx        context.Context         //nolint:containedctx // the node's lifetime
	cancel     context.CancelFunc
	maintCert  tls.Certificate
	faults     *faults
	methods    methodTable
	wg         sync.WaitGroup
	closeOnce  sync.Once
	ownCluster bool // the cluster is this node's private one: Close closes it

	// applyCounts count ApplyConfiguration calls (Applies, DryRunApplies).
	applyCounts applyCounts

	mu        sync.Mutex
	phase     State          // never StateBootstrapped: that is derived from the cluster
	active    *appliedConfig // running configuration; nil in maintenance
	persisted *appliedConfig // configuration the next boot runs; nil in maintenance
	serving   *servingTLS    // mutual-TLS material of the active configuration
	boot      *boot          // current listener and server; nil while down
	gen       uint64         // bumped whenever the API goes down; RPCs of older boots are refused
	tryTimer  *time.Timer    // reverts a TRY apply
	closing   bool           // Close has begun: nothing may come up any more
	bootedAt  time.Time      // when the API last came up
	bootID    string         // changes at every boot, like /proc/sys/kernel/random/boot_id
	version   string         // the Talos version the node runs (changes with an upgrade)
	schematic string         // the Image Factory schematic of its installer
	staged    *Installed     // an upgrade installed for the next boot
	// bootFailure stops every boot before the API comes up (a firmware refusal).
	bootFailure string
	// formatted is the configuration its system volumes were created with, at the install: what
	// they are encrypted with whatever the configuration says since (Talos encrypts a volume only
	// when it creates it).
	formatted *appliedConfig
	// publishedExtensions is how many ExtensionStatus resources the node publishes.
	publishedExtensions int
	images              map[string]bool // images pulled into the system containerd
	resources           state.State     // the node's COSI resources
	changed             chan struct{}   // closed at every state change

	nics    []NIC  // the VM's NICs (SetNICs changes them)
	nicsGen uint64 // bumped at every change of nics
	// net is the network of configuration netCfg with the NICs of generation netGen (networkFor).
	net          *netModel
	netCfg       *appliedConfig
	netGen       uint64
	heldVIPs     []netip.Addr        // the VIPs the cluster gave this node
	listenFailed map[netip.Addr]bool // addresses whose listening failure was logged
}

// Start brings up a node in maintenance mode. The node stops when ctx ends or Close is called.
func Start(ctx context.Context, opts Options) (*Node, error) {
	opts, ip, err := opts.normalize()
	if err != nil {
		return nil, fmt.Errorf("talosemu: %w", err)
	}

	cert, err := maintenanceCertificate(ip, opts.Hostname)
	if err != nil {
		return nil, fmt.Errorf("talosemu: maintenance certificate: %w", err)
	}

	ownCluster := opts.Cluster == nil
	if ownCluster {
		opts.Cluster = NewCluster()
	}

	n := &Node{
		opts:       opts,
		ip:         ip,
		addr:       net.JoinHostPort(ip.String(), strconv.Itoa(opts.Port)),
		maintCert:  cert,
		faults:     newFaults(opts),
		phase:      StateMaintenance,
		changed:    make(chan struct{}),
		version:    opts.TalosVersion,
		schematic:  opts.Schematic,
		images:     map[string]bool{},
		resources:  newResourceState(),
		ownCluster: ownCluster,
		nics:       opts.NICs,

		listenFailed: map[netip.Addr]bool{},
	}
	n.cluster.Store(opts.Cluster)
	n.methods = newMethodTable(n)
	n.ctx, n.cancel = context.WithCancel(ctx)

	if err := n.Cluster().register(n, n.recordLocked()); err != nil {
		n.cancel()
		return nil, fmt.Errorf("talosemu: %w", err)
	}

	installed, running, err := n.fromDisk()
	if err != nil {
		n.cancel()
		n.Cluster().unregister(n)

		return nil, fmt.Errorf("talosemu: %w", err)
	}

	if installed != nil {
		// An installed node boots its configuration from disk (as long as a reboot takes).
		n.mu.Lock()
		n.active, n.persisted, n.version, n.schematic = installed, installed, running.Version, running.Schematic
		n.formatted = n.opts.Disk.formattedWith()
		n.takeDownLocked(StateRebooting, n.opts.RebootDelay, func() {})
		n.mu.Unlock()
	} else if err := n.bringUp(StateMaintenance); err != nil {
		n.cancel()
		n.Cluster().unregister(n)

		return nil, fmt.Errorf("talosemu: %w", err)
	}

	go func() {
		<-n.ctx.Done()
		n.Close() //nolint:errcheck // Close never fails
	}()

	go n.watchVIPs()

	if installed == nil {
		opts.Logf("talosemu %s: up in maintenance mode", n.addr)
	}

	return n, nil
}

// fromDisk reads what Options.Disk holds: the installed configuration (nil if none), version and
// schematic.
func (n *Node) fromDisk() (*appliedConfig, Installed, error) {
	if n.opts.Disk == nil {
		return nil, Installed{}, nil
	}

	return n.opts.Disk.load()
}

// Address is the node's "127.0.0.x:port" listen address.
func (n *Node) Address() string { return n.addr }

// IP is the node's address without the port: the value for client endpoints and client.WithNode.
func (n *Node) IP() string { return n.ip.String() }

// Cluster is the registry the node belongs to.
func (n *Node) Cluster() *Cluster { return n.cluster.Load() }

// State reports the node's current state.
func (n *Node) State() State {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.stateLocked()
}

func (n *Node) stateLocked() State {
	if n.phase == StateInstalled && n.Cluster().isMember(n) {
		return StateBootstrapped
	}

	return n.phase
}

// Config returns the running machine configuration as it was applied, or nil in maintenance mode.
func (n *Node) Config() []byte {
	n.mu.Lock()
	defer n.mu.Unlock()

	if n.active == nil {
		return nil
	}

	return append([]byte(nil), n.active.raw...)
}

// PersistedConfig returns the configuration the node boots with next: it differs from Config after
// a STAGED apply (until the next reboot) and during a TRY apply.
func (n *Node) PersistedConfig() []byte {
	n.mu.Lock()
	defer n.mu.Unlock()

	if n.persisted == nil {
		return nil
	}

	return append([]byte(nil), n.persisted.raw...)
}

// Hostname is the name the node reports: the configured hostname, else Options.Hostname.
func (n *Node) Hostname() string {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.hostnameLocked()
}

func (n *Node) hostnameLocked() string {
	if n.active != nil {
		if h := configuredHostname(n.active.cfg); h != "" {
			return h
		}
	}

	return n.opts.Hostname
}

// configuredHostname is the static hostname of cfg, "" if none. The accessor reads the
// HostnameConfig document (contract 1.12 on) and falls back to machine.network.hostname; the two
// cannot be set together.
func configuredHostname(cfg config.Config) string {
	if h := cfg.NetworkHostnameConfig(); h != nil {
		return h.Hostname()
	}

	return ""
}

// WaitState blocks until the node is in one of the states in want, or ctx ends.
func (n *Node) WaitState(ctx context.Context, want ...State) error {
	for {
		n.mu.Lock()
		got := n.stateLocked()
		nodeCh := n.changed
		n.mu.Unlock()

		if slices.Contains(want, got) {
			return nil
		}

		if got == StateClosed {
			return fmt.Errorf("talosemu %s: closed while waiting for %v", n.addr, want)
		}

		select {
		case <-nodeCh:
		case <-n.Cluster().changedCh():
		case <-ctx.Done():
			return fmt.Errorf("talosemu %s: still %s, not %v: %w", n.addr, got, want, ctx.Err())
		}
	}
}

// Close stops the node, frees its address and removes it from its cluster; the node then reports
// StateClosed. It is safe to call more than once and from several goroutines.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()

		n.mu.Lock()
		n.closing = true
		n.gen++
		b := n.boot
		n.boot = nil
		n.stopTryTimerLocked()
		n.mu.Unlock()

		if b != nil {
			b.stop()
		}

		n.wg.Wait()
		n.Cluster().unregister(n)

		if n.ownCluster {
			n.Cluster().Close() //nolint:errcheck // removing a temporary directory
		}

		if n.opts.Disk != nil {
			n.mu.Lock()
			var raw, formatted []byte
			if n.persisted != nil {
				raw = n.persisted.raw
			}

			if n.formatted != nil {
				formatted = n.formatted.raw
			}

			n.opts.Disk.save(raw, Installed{Version: n.version, Schematic: n.schematic}, formatted)
			n.mu.Unlock()
		}

		// Only now, with the address released, does the node report StateClosed.
		n.mu.Lock()
		n.phase = StateClosed
		n.notifyLocked()
		n.mu.Unlock()

		n.opts.Logf("talosemu %s: closed", n.addr)
	})

	return nil
}

// setPhaseLocked changes the phase, publishes the node to its cluster and wakes waiters.
func (n *Node) setPhaseLocked(s State) {
	if n.phase != s {
		n.opts.Logf("talosemu %s: %s → %s", n.addr, n.phase, s)
	}

	n.phase = s
	n.publishLocked()
	n.Cluster().update(n, n.recordLocked())
	n.notifyLocked()
}

func (n *Node) notifyLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// recordLocked is what the node tells its cluster about itself.
func (n *Node) recordLocked() nodeRecord {
	m := n.networkFor(n.active)
	rec := nodeRecord{
		up: n.phase == StateInstalled, ip: n.ip, hostname: n.hostnameLocked(),
		etcdPorts: etcdPorts(n.opts.Port), disk: n.opts.Disk, version: n.version, bootID: n.bootID,
		systemUUID: n.opts.SystemUUID, addrs: n.nodeAddresses(m),
	}

	for _, d := range m.vips {
		if d.link != "" {
			rec.vips = append(rec.vips, d.ip)
		}
	}

	if n.active != nil {
		cfg := n.active.cfg
		rec.controlPlane = cfg.Machine().Type().IsControlPlane()
		rec.osCA = cfg.Machine().Security().IssuingCA()

		if rec.controlPlane {
			rec.etcdCA = cfg.Cluster().Etcd().CA()
		}

		rec.cfg = cfg
	}

	return rec
}

// isControlPlaneLocked reports whether the running configuration is a control plane's.
func (n *Node) isControlPlaneLocked() bool {
	return n.active != nil && n.active.cfg.Machine().Type().IsControlPlane()
}

func (n *Node) stopTryTimerLocked() {
	if n.tryTimer != nil {
		n.tryTimer.Stop()
		n.tryTimer = nil
	}
}

// talosVersion is the version the node runs.
func (n *Node) talosVersion() string {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.version
}
