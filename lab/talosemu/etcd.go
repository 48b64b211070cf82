package talosemu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/etcdmember"
)

// nodeEtcd is one control plane's etcd member as the cluster tracks it: a real embedded etcd
// server (lab/etcdmember) on the node's address, with the cluster's etcd CA.
type nodeEtcd struct {
	cfg      etcdmember.Config
	member   *etcdmember.Member // running; nil while stopped
	starting bool
	held     bool          // left the cluster or killed by a fault: no member until the next boot
	stopped  chan struct{} // closed once the last member instance has fully stopped
	started  chan struct{} // closed once the last start attempt has ended (nil: none)
	abort    func()        // cancels the last start attempt (nil: none)
	seq      int           // order in which members first ran
	id       uint64        // the member id once it ran (kept while stopped)
	failed   string        // why the etcd service failed for good (a recovering bootstrap); "" if not
}

// etcdRetry is how soon a failed start of a member is tried again (Talos' etcd service retries
// too, e.g. while the cluster has no quorum).
const etcdRetry = time.Second

// Bootstrapped reports whether an etcd member runs somewhere in the cluster.
func (c *Cluster) Bootstrapped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	return c.runningLocked() > 0
}

// EtcdMembers lists the hostnames of the control planes whose etcd member runs, in the order they
// first started. The etcd member list itself (which also holds stopped and dead members) is what
// the EtcdMemberList API reports.
func (c *Cluster) EtcdMembers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()

	type named struct {
		seq  int
		name string
	}

	var list []named

	for _, e := range c.etcd {
		if e.member != nil {
			list = append(list, named{e.seq, e.cfg.Name})
		}
	}

	slices.SortFunc(list, func(a, b named) int { return a.seq - b.seq })

	names := make([]string, 0, len(list))
	for _, m := range list {
		names = append(names, m.name)
	}

	return names
}

func (c *Cluster) runningLocked() int {
	count := 0

	for _, e := range c.etcd {
		if e.member != nil {
			count++
		}
	}

	return count
}

func (c *Cluster) isMember(n *Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	e := c.etcd[n]

	return e != nil && e.member != nil
}

// bootstrap starts a new one-member etcd cluster on n, as the Bootstrap API does: empty, or
// restored from the snapshot EtcdRecover uploaded (recoverEtcd). Like Talos, it returns at once;
// the member runs a moment later, and a failed restore shows as a failed etcd service.
func (c *Cluster) bootstrap(n *Node, recoverEtcd, skipHashCheck bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()

	rec := c.records[n]
	e := c.nodeEtcdLocked(n, rec)

	if e.member != nil || e.starting || hasData(e.cfg.Dir) {
		return status.Error(codes.AlreadyExists, "etcd data directory is not empty")
	}

	if c.runningLocked() > 0 {
		return status.Error(codes.FailedPrecondition,
			"talosemu: this registry already runs an etcd cluster; bootstrapping a second one would split the cluster")
	}

	c.etcdCA = rec.etcdCA.Crt
	e.held, e.failed = false, ""

	if !recoverEtcd {
		c.log.add(Event{Node: rec.hostname, Kind: "bootstrap"})
		c.startLocked(n, e, "bootstrap", func(ctx context.Context) (*etcdmember.Member, error) {
			return etcdmember.Bootstrap(ctx, e.cfg)
		})

		return nil
	}

	detail := "recover"
	if skipHashCheck {
		detail += ", hash check skipped"
	}

	c.log.add(Event{Node: rec.hostname, Kind: "bootstrap", Detail: detail})
	c.startLocked(n, e, "recovery", func(ctx context.Context) (*etcdmember.Member, error) {
		return c.restoreAndStart(ctx, e.cfg, skipHashCheck)
	})

	return nil
}

// startReadyLocked starts the member of every up control plane that should run one: from its
// data directory after a reboot, or by joining the running cluster when it has none yet.
func (c *Cluster) startReadyLocked() {
	if c.closed {
		return
	}

	endpoints := c.clientURLsLocked(true)

	for _, n := range c.nodes {
		rec := c.records[n]
		if !rec.up || !rec.controlPlane || rec.etcdCA == nil {
			continue
		}

		e := c.nodeEtcdLocked(n, rec)
		if e.member != nil || e.starting || e.held {
			continue
		}

		switch {
		case hasData(e.cfg.Dir):
			c.startLocked(n, e, "restart", func(ctx context.Context) (*etcdmember.Member, error) {
				return etcdmember.Restart(ctx, e.cfg)
			})
		case len(endpoints) > 0 && string(rec.etcdCA.Crt) == string(c.etcdCA):
			c.startLocked(n, e, "join", func(ctx context.Context) (*etcdmember.Member, error) {
				return etcdmember.Join(ctx, e.cfg, endpoints)
			})
		}
	}
}

// startLocked runs start in the background once the member's previous instance has stopped. The
// attempt ends with the node, or when the node is powered off (see powerOffLocked).
func (c *Cluster) startLocked(n *Node, e *nodeEtcd, what string, start func(context.Context) (*etcdmember.Member, error)) {
	e.starting = true
	prev := e.stopped
	attempt := make(chan struct{})
	e.started = attempt
	machine, abort := context.WithCancel(n.ctx)
	e.abort = abort

	go func() {
		defer close(attempt)
		defer abort()

		<-prev

		ctx, cancel := context.WithTimeout(machine, 2*time.Minute)
		m, err := start(ctx)
		cancel()

		c.mu.Lock()
		defer c.mu.Unlock()

		e.starting = false
		rec, registered := c.records[n]

		var pre *preStageError

		switch {
		case errors.As(err, &pre):
			// Talos' etcd service stays failed: no retry until the next boot or bootstrap.
			e.failed, e.held = pre.Error(), true
			c.opts.Logf("talosemu %s: etcd %s failed: %v", n.addr, what, err)
		case err != nil:
			if m != nil { // a start that failed half-way must not leave its server running
				c.stopMember(m, true, nil)
			}

			c.opts.Logf("talosemu %s: etcd %s failed: %v", n.addr, what, err)
			time.AfterFunc(etcdRetry, func() {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.startReadyLocked()
			})
		case !registered || !rec.up || c.closed:
			// The machine went down while etcd started: stop it now, before this attempt counts as
			// ended (a powered-off machine's disk may be deleted right after).
			if m != nil {
				c.stopMember(m, true, nil)
			}
		default:
			e.member, e.id = m, m.ID
			if e.seq == 0 {
				c.seq++
				e.seq = c.seq
			}
			c.etcdCA = rec.etcdCA.Crt
			c.opts.Logf("talosemu %s: etcd member %x running (%s)", n.addr, m.ID, what)
			c.etcdEventLocked(n)
			go c.watchRemoval(n, e, m)
			c.startReadyLocked()
		}

		c.notifyLocked()
	}()
}

// watchRemoval notices a member that etcd removed from the cluster: its server stops by itself,
// as a real etcd does when it learns it was removed.
func (c *Cluster) watchRemoval(n *Node, e *nodeEtcd, m *etcdmember.Member) {
	<-m.Stopped()

	c.mu.Lock()
	defer c.mu.Unlock()

	if e.member == m {
		// Removed, so no longer listed: the event below must not count it as a dead member
		// (a member leaving through EtcdLeaveCluster may stop here before leave takes it away).
		e.member, e.id = nil, 0
		e.stopped = make(chan struct{})
		go c.stopMember(m, false, e.stopped)
		c.opts.Logf("talosemu %s: etcd member %x stopped", n.addr, m.ID)
		c.etcdEventLocked(n)
		c.notifyLocked()
	}
}

// stopLocked stops n's member gracefully (a reboot), keeping its data. At the next boot the
// etcd service starts again, also after the node left the cluster.
func (c *Cluster) stopLocked(n *Node) {
	if e := c.etcd[n]; e != nil {
		e.held, e.failed = false, ""
	}

	if e := c.etcd[n]; e != nil && e.member != nil {
		m := e.member
		e.member = nil
		e.stopped = make(chan struct{})
		go c.stopMember(m, false, e.stopped)
		c.etcdEventLocked(n)
	}
}

// powerOffLocked hard-stops n's member (no leadership transfer, no goodbye): it stays in the
// member list. A member still starting (e.g. waiting for a quorum) is cancelled and stops the
// same way. Its data stays on the node's SystemDisk; without one, the machine is gone for good
// and its directory is removed. The returned channel is closed once all of that is done.
func (c *Cluster) powerOffLocked(n *Node) <-chan struct{} {
	done := make(chan struct{})

	e := c.etcd[n]
	if e == nil {
		close(done)

		return done
	}

	prev, m, starting := e.stopped, e.member, e.started
	e.member = nil

	if e.abort != nil {
		e.abort()
	}

	if m != nil {
		c.etcdEventLocked(n) // the dead member still counts: it stays in the member list
	}

	delete(c.etcd, n)
	keep := c.records[n].disk != nil

	go func() {
		defer close(done)

		if starting != nil {
			<-starting // a member that was starting (now cancelled) is stopped by its own start goroutine
		}

		<-prev
		if m != nil {
			c.stopMember(m, true, nil)
		}

		if !keep {
			os.RemoveAll(e.cfg.Dir) //nolint:errcheck // a temporary directory
		}
	}()

	return done
}

func (c *Cluster) stopMember(m *etcdmember.Member, hard bool, done chan struct{}) {
	stopped := make(chan struct{})

	go func() {
		defer close(stopped)

		if hard {
			m.HardStop()
		} else {
			m.Stop()
		}
	}()

	// A machine powered off is gone at once, and a reboot does not wait forever either: an
	// embedded member whose server never reports stopped (seen once the other members had gone)
	// is abandoned after memberStopTimeout, with the failure reported, so no teardown hangs.
	select {
	case <-stopped:
	case <-time.After(memberStopTimeout):
		c.opts.Logf("talosemu: etcd member %x did not stop within %s; abandoned (its ports stay taken until the process ends)",
			m.ID, memberStopTimeout)
		c.abandoned.Add(1)
	}

	if done != nil {
		close(done)
	}
}

// memberStopTimeout bounds an embedded etcd member's stop (stopMember).
const memberStopTimeout = 20 * time.Second

// AbandonedMembers is how many etcd members did not stop within their bound (stopMember).
func (c *Cluster) AbandonedMembers() int { return int(c.abandoned.Load()) }

// nodeEtcdLocked returns n's member record, creating it with the member's configuration.
func (c *Cluster) nodeEtcdLocked(n *Node, rec nodeRecord) *nodeEtcd {
	if e := c.etcd[n]; e != nil {
		return e
	}

	dir := filepath.Join(c.dirLocked(), n.ip.String()+"-"+strconv.Itoa(n.opts.Port))
	if rec.disk != nil {
		dir = filepath.Join(rec.disk.Dir, "etcd")
	}

	done := make(chan struct{})
	close(done)

	// The member advertises (and, in the lab, listens on) the address Talos' etcd advertises.
	ip := n.ip
	if rec.cfg != nil {
		if a := etcdAdvertisedIP(rec.cfg, rec.addrs); a.IsValid() {
			ip = a
		}
	}

	e := &nodeEtcd{
		cfg: etcdmember.Config{
			Name: rec.hostname, IP: ip.AsSlice(), ClientPort: rec.etcdPorts[0], PeerPort: rec.etcdPorts[1],
			Dir: dir, CA: rec.etcdCA, Fast: c.opts.FastEtcd,
		},
		stopped: done,
	}
	c.etcd[n] = e

	return e
}

func (c *Cluster) dirLocked() string {
	if c.opts.Dir != "" {
		return c.opts.Dir
	}

	if c.tmpDir == "" {
		dir, err := os.MkdirTemp("", "talosemu-etcd-")
		if err != nil {
			dir = filepath.Join(os.TempDir(), "talosemu-etcd-fallback")
		}

		c.tmpDir = dir
	}

	return c.tmpDir
}

// hasData reports whether a member's data directory holds an etcd member.
func hasData(dir string) bool {
	entries, err := os.ReadDir(filepath.Join(dir, "data"))

	return err == nil && len(entries) > 0
}

// etcdPorts are the member's client and peer ports: etcd's 2379/2380 for nodes on the default
// apid port; nodes sharing an address on other apid ports use the two ports after it.
func etcdPorts(apid int) [2]int {
	if apid == DefaultPort {
		return [2]int{2379, 2380}
	}

	return [2]int{apid + 1, apid + 2}
}
