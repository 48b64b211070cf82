package talosemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/etcdmember"
)

// leave takes n out of etcd: gracefully (EtcdLeaveCluster, a graceful reset) it removes its
// member through the cluster, retrying while etcd refuses membership changes, then stops it;
// either way the data directory is wiped. Ungracefully the member stays listed, dead.
func (c *Cluster) leave(ctx context.Context, n *Node, graceful bool) error {
	c.mu.Lock()
	e := c.etcd[n]
	if e == nil {
		c.mu.Unlock()
		return nil
	}

	// A member still starting finishes first (its data would land after the wipe).
	for e.starting {
		ch := c.changed
		c.mu.Unlock()

		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("failed to leave cluster: etcd is still starting: %w", ctx.Err())
		}

		c.mu.Lock()
	}

	m := e.member
	endpoints := c.clientURLsLocked(false)
	ca := c.records[n].etcdCA
	c.mu.Unlock()

	if graceful && m != nil {
		cli, err := etcdmember.NewClient(ca, endpoints...)
		if err != nil {
			return fmt.Errorf("failed to leave cluster: %w", err)
		}

		err = etcdmember.Leave(ctx, cli, m.ID)
		cli.Close() //nolint:errcheck

		if err != nil {
			return fmt.Errorf("failed to leave cluster: %w", err)
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	// Stop, then wipe, and only then let a later start (which waits for e.stopped) use the
	// directory: etcd ends the process if its data vanishes under it.
	running := e.member
	e.member = nil
	if graceful && m != nil {
		e.id = 0 // it left: no longer listed
	}
	prev := e.stopped
	done := make(chan struct{})
	e.stopped = done
	e.held = true

	go func() {
		defer close(done)

		<-prev
		if running != nil {
			c.stopMember(running, !graceful, nil)
		}

		os.RemoveAll(filepath.Join(e.cfg.Dir, "data"))            //nolint:errcheck // best effort, like a wipe
		os.Remove(filepath.Join(e.cfg.Dir, recoverySnapshotName)) //nolint:errcheck // EPHEMERAL holds it too
	}()

	c.notifyLocked()

	return nil
}

// etcdClient is an etcd client with Talos' admin identity for n: its own member (local) or every
// control plane of the cluster, running or not, as Talos' NewClientFromControlPlaneIPs does.
func (c *Cluster) etcdClient(n *Node, local bool) (*clientv3.Client, *nodeEtcd, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	rec := c.records[n]
	e := c.etcd[n]

	endpoints := c.clientURLsLocked(false)
	if local {
		if e == nil || e.member == nil {
			return nil, e, errors.New("etcd is not running on this node")
		}

		endpoints = []string{e.member.ClientURL()}
	}

	if len(endpoints) == 0 || rec.etcdCA == nil {
		return nil, e, errors.New("no etcd member to ask: the cluster is not bootstrapped")
	}

	cli, err := etcdmember.NewClient(rec.etcdCA, endpoints...)

	return cli, e, err
}

// clientURLsLocked lists the control planes' etcd client URLs: only running members, or every
// control plane that ever ran one.
func (c *Cluster) clientURLsLocked(runningOnly bool) []string {
	var urls []string

	for _, n := range c.nodes {
		if e := c.etcd[n]; e != nil && (e.member != nil || !runningOnly) {
			urls = append(urls, "https://"+net.JoinHostPort(e.cfg.IP.String(), strconv.Itoa(e.cfg.ClientPort)))
		}
	}

	return urls
}

// killEtcd hard-stops n's member and holds it down until n's next boot. The returned channel is
// closed once the member's server has stopped.
func (c *Cluster) killEtcd(n *Node) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()

	e := c.etcd[n]
	if e == nil {
		done := make(chan struct{})
		close(done)

		return done
	}

	e.held = true

	if e.member != nil {
		m := e.member
		e.member = nil
		e.stopped = make(chan struct{})
		go c.stopMember(m, true, e.stopped)
	}

	c.notifyLocked()

	return e.stopped
}

func (c *Cluster) restartEtcd(n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if e := c.etcd[n]; e != nil {
		e.held = false
	}

	c.startReadyLocked()
	c.notifyLocked()
}
