package talosemu

import (
	"fmt"
	"sync"
	"time"
)

// Event is one thing that happened in a cluster, in the order it happened: what tests read to
// check the order of a rollout and that etcd kept its quorum.
type Event struct {
	Time time.Time
	// Node is the hostname ("" before the node has a configuration).
	Node string
	// Kind is "down" (the API goes down for a reboot or reset), "boot" (the API is up again, on
	// Version), "bootstrap" (the Bootstrap API started the cluster's etcd on Node; Detail
	// "recover" or "recover, hash check skipped" when it restores an uploaded snapshot), "etcd" (a
	// member started or stopped; Running of Members then run), "ready" (the Node first said Ready
	// in this boot, as the API server accepted it), "etcd-snapshot" (EtcdSnapshot on Node: Detail
	// "started", then "completed" or "truncated" with Bytes streamed, or "failed" with Error),
	// "etcd-recover" (EtcdRecover stored an uploaded snapshot of Bytes) or "etcd-restore" (a
	// recovering bootstrap restored the snapshot: Detail "restored", or "failed" with Error, the
	// etcd service's failure message).
	Kind    string
	Version string
	// Running and Members count etcd members after an "etcd" event: running, and those of the
	// control planes the cluster tracks (a member that ran on a node that is still registered;
	// a powered-off node's member counts in its own event).
	Running, Members int
	// Detail qualifies Kind (see Kind).
	Detail string
	// Bytes is the size of the snapshot an "etcd-snapshot" or "etcd-recover" event moved.
	Bytes int64
	// Error is what failed, for Detail "failed" and "truncated".
	Error string
}

func (e Event) String() string {
	switch e.Kind {
	case "boot":
		return fmt.Sprintf("%s boot %s", e.Node, e.Version)
	case "etcd":
		return fmt.Sprintf("%s etcd %d/%d running", e.Node, e.Running, e.Members)
	case "etcd-snapshot", "etcd-recover", "etcd-restore", "bootstrap":
		s := e.Node + " " + e.Kind
		if e.Detail != "" {
			s += " " + e.Detail
		}

		if e.Bytes > 0 {
			s += fmt.Sprintf(" (%d bytes)", e.Bytes)
		}

		if e.Error != "" {
			s += ": " + e.Error
		}

		return s
	default:
		return e.Node + " " + e.Kind
	}
}

// eventLog is a cluster's event log; it has its own lock so nodes and the cluster can write to
// it while holding theirs.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()

	e.Time = time.Now()
	l.events = append(l.events, e)
}

// Events returns the cluster's events so far.
func (c *Cluster) Events() []Event {
	c.log.mu.Lock()
	defer c.log.mu.Unlock()

	return append([]Event(nil), c.log.events...)
}

// etcdEventLocked records the members' state after a member of n started or stopped.
func (c *Cluster) etcdEventLocked(n *Node) {
	members := 0

	for _, e := range c.etcd {
		if e.id != 0 {
			members++
		}
	}

	c.log.add(Event{Node: c.records[n].hostname, Kind: "etcd", Running: c.runningLocked(), Members: members})
}
