package talosemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/etcdmember"
)

// etcd backup and disaster recovery as machined v1.14.1 does it
// (internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go EtcdSnapshot, EtcdRecover;
// internal/app/machined/pkg/system/services/etcd.go BootstrapEtcd, recoverFromSnapshot): a real
// snapshot of the node's etcd member, an upload stored where Talos stores it, and a recovering
// bootstrap that restores it with etcdutl into a one-member cluster.

// snapshotChunk is the size of the messages EtcdSnapshot streams (Talos' stream chunker).
const snapshotChunk = 1024

// recoverySnapshotName is the uploaded snapshot's name beside the member's data directory, as
// /var/lib/etcd.snapshot lies beside /var/lib/etcd.
const recoverySnapshotName = "etcd.snapshot"

// EtcdSnapshot streams a snapshot of this control plane's own etcd member. Like machined it asks
// the member's local endpoint whether a member listens there or not: without one, the call waits
// until its deadline ("failed reading etcd snapshot: context deadline exceeded"). A snapshot
// stream that breaks off ends this stream without an error, as machined's chunker does.
func (s *machineService) EtcdSnapshot(_ *machineapi.EtcdSnapshotRequest, srv machineapi.MachineService_EtcdSnapshotServer) error {
	if err := s.controlPlaneOnly("EtcdSnapshot", "etcd snapshot"); err != nil {
		return err
	}

	n := s.node
	host := n.Hostname()
	n.Cluster().log.add(Event{Node: host, Kind: "etcd-snapshot", Detail: "started"})

	sent, cut, err := s.streamSnapshot(srv)

	switch {
	case err != nil:
		n.Cluster().log.add(Event{Node: host, Kind: "etcd-snapshot", Detail: "failed", Bytes: sent, Error: err.Error()})
	case cut != nil:
		n.Cluster().log.add(Event{Node: host, Kind: "etcd-snapshot", Detail: "truncated", Bytes: sent, Error: cut.Error()})
	default:
		n.Cluster().log.add(Event{Node: host, Kind: "etcd-snapshot", Detail: "completed", Bytes: sent})
	}

	return err
}

// streamSnapshot sends the snapshot and reports how many bytes it sent, why the snapshot ended
// early (cut; the call still succeeds) or the call's error.
func (s *machineService) streamSnapshot(srv machineapi.MachineService_EtcdSnapshotServer) (sent int64, cut, err error) {
	faults := s.node.currentFaults()
	if faults.SnapshotError != codes.OK {
		return 0, nil, status.Error(faults.SnapshotError, "talosemu: injected failure of EtcdSnapshot")
	}

	ctx := srv.Context()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, etcdCallTimeout)
		defer cancel()
	}

	cli, err := s.node.Cluster().localEtcdClient(s.node)
	if err != nil {
		return 0, nil, fmt.Errorf("failed to create etcd client: %w", err)
	}
	defer cli.Close() //nolint:errcheck

	rd, err := cli.Snapshot(ctx) //nolint:staticcheck // machined calls the deprecated Snapshot
	if err != nil {
		return 0, nil, fmt.Errorf("failed reading etcd snapshot: %w", err)
	}
	defer rd.Close() //nolint:errcheck

	var source io.Reader = rd

	if faults.SnapshotTruncated {
		whole, err := io.ReadAll(rd)
		if err != nil {
			return 0, err, nil
		}

		source = &limitedSnapshot{data: whole[:len(whole)/2]}
		cut = fmt.Errorf("talosemu: injected truncation after %d of %d bytes", len(whole)/2, len(whole))
	}

	buf := make([]byte, snapshotChunk)

	for {
		k, rerr := source.Read(buf)
		if k > 0 {
			if err := srv.Send(&common.Data{Bytes: buf[:k]}); err != nil {
				return sent, nil, err
			}

			sent += int64(k)
		}

		switch {
		case errors.Is(rerr, io.EOF):
			return sent, cut, nil
		case rerr != nil:
			return sent, rerr, nil
		}
	}
}

// limitedSnapshot serves the part of a snapshot that a truncation fault lets through.
type limitedSnapshot struct{ data []byte }

func (l *limitedSnapshot) Read(p []byte) (int, error) {
	if len(l.data) == 0 {
		return 0, io.EOF
	}

	k := copy(p, l.data)
	l.data = l.data[k:]

	return k, nil
}

// EtcdRecover stores an uploaded snapshot where a recovering Bootstrap reads it, replacing an
// earlier upload only once the new one is complete. Like machined it does not look at etcd: an
// upload to a node whose member runs is stored too, and Bootstrap then refuses to use it.
func (s *machineService) EtcdRecover(srv machineapi.MachineService_EtcdRecoverServer) error {
	// machined first checks that /var/lib exists ("etcd service is not ready for recovery yet");
	// it always does on a configured emulated node.
	if err := s.controlPlaneOnly("EtcdRecover", "etcd recover"); err != nil {
		return err
	}

	path, err := s.node.Cluster().recoverySnapshotPath(s.node)
	if err != nil {
		return fmt.Errorf("error creating etcd recovery snapshot: %w", err)
	}

	size, err := receiveSnapshot(srv, path)
	if err != nil {
		return err
	}

	s.node.Cluster().log.add(Event{Node: s.node.Hostname(), Kind: "etcd-recover", Detail: "uploaded", Bytes: size})
	s.node.opts.Logf("talosemu %s: etcd snapshot of %d bytes uploaded", s.node.addr, size)

	return srv.SendAndClose(&machineapi.EtcdRecoverResponse{Messages: []*machineapi.EtcdRecover{{}}})
}

// receiveSnapshot writes the upload to a temporary file beside path and moves it into place once
// complete, with machined's error texts.
func receiveSnapshot(srv machineapi.MachineService_EtcdRecoverServer, path string) (size int64, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("error creating etcd recovery snapshot: %w", err)
	}

	defer f.Close() //nolint:errcheck

	done := false

	defer func() {
		if !done {
			os.Remove(f.Name()) //nolint:errcheck
		}
	}()

	for {
		msg, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			return 0, err
		}

		k, err := f.Write(msg.GetBytes())
		if err != nil {
			return 0, fmt.Errorf("error writing snapshot: %w", err)
		}

		size += int64(k)
	}

	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("error fsyncing snapshot: %w", err)
	}

	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("error closing snapshot: %w", err)
	}

	if err := os.Rename(f.Name(), path); err != nil {
		return 0, fmt.Errorf("error moving snapshot into place: %w", err)
	}

	done = true

	return size, nil
}

// localEtcdClient is machined's etcd.NewLocalClient: a client of n's own member endpoint, whether
// a member listens there or not (clientv3 then waits for one until the call's deadline).
func (c *Cluster) localEtcdClient(n *Node) (*clientv3.Client, error) {
	c.mu.Lock()
	rec := c.records[n]
	ip := rec.ip

	if e := c.etcd[n]; e != nil {
		ip, _ = netip.AddrFromSlice(e.cfg.IP)
		ip = ip.Unmap()
	}
	c.mu.Unlock()

	if rec.etcdCA == nil {
		return nil, errors.New("the machine configuration has no etcd CA")
	}

	return etcdmember.NewClient(rec.etcdCA, "https://"+net.JoinHostPort(ip.String(), strconv.Itoa(rec.etcdPorts[0])))
}

// recoverySnapshotPath is where n keeps an uploaded snapshot (its /var/lib/etcd.snapshot); its
// directory exists once this returns.
func (c *Cluster) recoverySnapshotPath(n *Node) (string, error) {
	c.mu.Lock()
	e := c.nodeEtcdLocked(n, c.records[n])
	c.mu.Unlock()

	return filepath.Join(e.cfg.Dir, recoverySnapshotName), os.MkdirAll(e.cfg.Dir, 0o700)
}

// preStageError is a failure of the etcd service's pre stage: in Talos the service then stays
// "Failed" with this message until the node boots again or is bootstrapped again.
type preStageError struct{ err error }

func (e *preStageError) Error() string { return "Failed to run pre stage: " + e.err.Error() }
func (e *preStageError) Unwrap() error { return e.err }

// restoreAndStart is the recovering etcd service: machined's recoverFromSnapshot (status, then
// etcdutl's restore into the empty data directory as a one-member cluster named after the node
// with its peer URL, then the upload is deleted), then the member starts from the restored data.
// etcdutl leaves what it wrote when the restore fails (e.g. on a hash mismatch): the data
// directory is then not empty, and Bootstrap refuses until EPHEMERAL is wiped, as on Talos.
func (c *Cluster) restoreAndStart(ctx context.Context, cfg etcdmember.Config, skipHashCheck bool) (*etcdmember.Member, error) {
	path := filepath.Join(cfg.Dir, recoverySnapshotName)

	fail := func(err error) (*etcdmember.Member, error) {
		pre := &preStageError{err}
		c.log.add(Event{Node: cfg.Name, Kind: "etcd-restore", Detail: "failed", Error: pre.Error()})

		return nil, pre
	}

	st, err := etcdmember.SnapshotStatus(path)
	if err != nil {
		return fail(fmt.Errorf("error verifying snapshot: %w", err))
	}

	c.opts.Logf("talosemu %s: recovering etcd from snapshot: hash %08x, revision %d, total keys %d, total size %d",
		cfg.Name, st.Hash, st.Revision, st.TotalKey, st.TotalSize)

	if err := etcdmember.Restore(cfg, path, skipHashCheck); err != nil {
		return fail(fmt.Errorf("error recovering from the snapshot: %w", err))
	}

	if err := os.Remove(path); err != nil {
		return fail(fmt.Errorf("error deleting snapshot: %w", err))
	}

	c.log.add(Event{Node: cfg.Name, Kind: "etcd-restore", Detail: "restored"})

	return etcdmember.Restart(ctx, cfg)
}

// etcdFailure is the message of n's failed etcd service ("" unless it failed).
func (c *Cluster) etcdFailure(n *Node) string {
	c.mu.Lock()
	defer c.mu.Unlock()

	if e := c.etcd[n]; e != nil {
		return e.failed
	}

	return ""
}
