package talosemu_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"google.golang.org/grpc/codes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/etcdmember"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// takeSnapshot reads a whole EtcdSnapshot stream from n through the real Talos client.
func takeSnapshot(ctx context.Context, t *testing.T, n *talosemu.Node) ([]byte, error) {
	t.Helper()

	rd, err := secureClient(t, n).EtcdSnapshot(ctx, &machineapi.EtcdSnapshotRequest{})
	if err != nil {
		return nil, err
	}
	defer rd.Close() //nolint:errcheck

	return io.ReadAll(rd)
}

// checkSnapshot fails unless data is a snapshot etcdutl accepts: its sha256 digest matches and
// `etcdutl snapshot status` reads it; it returns the snapshot's revision.
func checkSnapshot(t *testing.T, data []byte) int64 {
	t.Helper()

	if err := snapshotDigestOK(data); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "snapshot.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	st, err := etcdmember.SnapshotStatus(path)
	if err != nil {
		t.Fatalf("etcdutl snapshot status: %v", err)
	}

	return st.Revision
}

// snapshotDigestOK checks etcd's integrity digest: sha256 of the database, appended to it.
func snapshotDigestOK(data []byte) error {
	if len(data)%512 != sha256.Size {
		return fmt.Errorf("a snapshot of %d bytes carries no digest", len(data))
	}

	db, digest := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sum := sha256.Sum256(db); !bytes.Equal(sum[:], digest) {
		return fmt.Errorf("digest %x, database hashes to %x", digest, sum)
	}

	return nil
}

// putKeys writes keys through n's etcd member and returns the revision after the last write.
func putKeys(t *testing.T, n *talosemu.Node, kv map[string]string) int64 {
	t.Helper()

	cli := etcdClient(t, "https://"+n.IP()+":2379")

	var rev int64

	for k, v := range kv {
		resp, err := cli.Put(nodeCtx(t, n), k, v)
		if err != nil {
			t.Fatal(err)
		}

		rev = max(rev, resp.Header.Revision)
	}

	return rev
}

func wantKeys(t *testing.T, n *talosemu.Node, kv map[string]string) {
	t.Helper()

	cli := etcdClient(t, "https://"+n.IP()+":2379")

	for k, v := range kv {
		got, err := cli.Get(nodeCtx(t, n), k)
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != v {
			t.Fatalf("%s on %s after recovery: %v (%v); want %q", k, n.Hostname(), got, err, v)
		}
	}
}

// waitEvent waits until the cluster logged an event that match accepts.
func waitEvent(t *testing.T, c *talosemu.Cluster, d time.Duration, what string, match func(talosemu.Event) bool) talosemu.Event {
	t.Helper()

	deadline := time.Now().Add(d)

	for {
		if i := slices.IndexFunc(c.Events(), match); i >= 0 {
			return c.Events()[i]
		}

		if time.Now().After(deadline) {
			t.Fatalf("no %s event within %v; events: %v", what, d, c.Events())
		}

		time.Sleep(20 * time.Millisecond) // polling the log for the awaited event
	}
}

func eventIndex(events []talosemu.Event, node, kind, detail string) int {
	return slices.IndexFunc(events, func(e talosemu.Event) bool {
		return e.Node == node && e.Kind == kind && e.Detail == detail
	})
}

// The disaster: every control plane is gone with its data. A snapshot taken before, uploaded to a
// new first control plane and restored by a recovering bootstrap brings the keys back; the other
// control planes join it as they join any cluster.
func TestEtcdSnapshotAndDisasterRecovery(t *testing.T) {
	t.Parallel()

	cluster, cps := threeControlPlanes(t)

	keys := map[string]string{"/lab/dr/a": "alpha", "/lab/dr/b": "bravo", "/lab/dr/c": "charlie"}
	rev := putKeys(t, cps[0], keys)

	snapshot, err := takeSnapshot(nodeCtx(t, cps[0]), t, cps[0])
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}

	if got := checkSnapshot(t, snapshot); got < rev {
		t.Fatalf("snapshot revision %d, keys written up to revision %d", got, rev)
	}

	done := waitEvent(t, cluster, time.Second, "snapshot completed", func(e talosemu.Event) bool {
		return e.Kind == "etcd-snapshot" && e.Detail == "completed"
	})
	if done.Node != "cp-1" || done.Bytes != int64(len(snapshot)) {
		t.Fatalf("snapshot event %+v; want cp-1 and %d bytes", done, len(snapshot))
	}

	// Every VM is deleted: their members and data are gone.
	addrs := make([]string, 0, len(cps))
	for _, cp := range cps {
		addrs = append(addrs, cp.IP())
		cp.Close() //nolint:errcheck
	}

	// New VMs at the same addresses, configured with the same secrets.
	fresh := make([]*talosemu.Node, 0, len(addrs))
	for i, addr := range addrs {
		n := startNode(t, talosemu.Options{Address: addr, Cluster: cluster})
		install(t, n, machineConfig(t, machine.TypeControlPlane, fmt.Sprintf("cp-%d", i+1)))
		fresh = append(fresh, n)
	}

	c := secureClient(t, fresh[0])
	if _, err := c.EtcdRecover(nodeCtx(t, fresh[0]), bytes.NewReader(snapshot)); err != nil {
		t.Fatalf("upload: %v", err)
	}

	if err := c.Bootstrap(nodeCtx(t, fresh[0]), &machineapi.BootstrapRequest{RecoverEtcd: true}); err != nil {
		t.Fatalf("recovering bootstrap: %v", err)
	}

	for _, n := range fresh {
		waitStateFor(t, n, 60*time.Second, talosemu.StateBootstrapped)
	}

	wantKeys(t, fresh[0], keys)
	wantKeys(t, fresh[2], keys)

	if names, _, err := memberList(t, fresh[1]); err != nil || strings.Join(names, ",") != "cp-1,cp-2,cp-3" {
		t.Fatalf("members after the recovery: %v (%v)", names, err)
	}

	// The log proves the order: the snapshot completed before the first control plane went
	// down, then the upload, the recovering bootstrap and the restore.
	events := cluster.Events()
	order := []int{
		eventIndex(events, "cp-1", "etcd-snapshot", "completed"),
		slices.IndexFunc(events, func(e talosemu.Event) bool { return e.Kind == "etcd" && e.Running < e.Members }),
		eventIndex(events, "cp-1", "etcd-recover", "uploaded"),
		eventIndex(events, "cp-1", "bootstrap", "recover"),
		eventIndex(events, "cp-1", "etcd-restore", "restored"),
	}

	if slices.Contains(order, -1) || !slices.IsSorted(order) {
		t.Fatalf("event order %v; events: %v", order, events)
	}

	// The upload was consumed, as Talos deletes /var/lib/etcd.snapshot after the restore.
	err = c.Bootstrap(nodeCtx(t, fresh[0]), &machineapi.BootstrapRequest{RecoverEtcd: true})
	wantCode(t, err, codes.AlreadyExists)
}

// What a recovering bootstrap refuses. As on Talos, Bootstrap itself answers at once; a snapshot
// that cannot be restored fails the etcd service, whose failure ServiceList reports.
func TestEtcdRecoveryRefusals(t *testing.T) {
	t.Parallel()

	// cp-1 runs a cluster to take a snapshot from; the others are fresh control planes of another
	// registry (a cluster that died), else they would join cp-1's.
	cp1 := startNode(t, talosemu.Options{Cluster: newCluster(t)})
	install(t, cp1, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	cluster := newCluster(t)
	nodes := map[string]*talosemu.Node{}

	for _, name := range []string{"missing", "corrupt", "nohash", "skip"} {
		n := startNode(t, talosemu.Options{Cluster: cluster})
		install(t, n, machineConfig(t, machine.TypeControlPlane, name))
		nodes[name] = n
	}

	if err := secureClient(t, cp1).Bootstrap(nodeCtx(t, cp1), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	waitStateFor(t, cp1, 30*time.Second, talosemu.StateBootstrapped)

	const value = "corruptible-value-0123456789"
	putKeys(t, cp1, map[string]string{"/lab/dr/probe": value})

	snapshot, err := takeSnapshot(nodeCtx(t, cp1), t, cp1)
	if err != nil {
		t.Fatal(err)
	}

	// An upload to a running member is stored, as machined stores it; the bootstrap refuses it.
	if _, err := secureClient(t, cp1).EtcdRecover(nodeCtx(t, cp1), bytes.NewReader(snapshot)); err != nil {
		t.Fatalf("upload to a running member: %v", err)
	}

	err = secureClient(t, cp1).Bootstrap(nodeCtx(t, cp1), &machineapi.BootstrapRequest{RecoverEtcd: true})
	wantCode(t, err, codes.AlreadyExists)

	corrupt := bytes.Clone(snapshot)
	i := bytes.Index(corrupt, []byte(value))
	if i < 0 {
		t.Fatal("the snapshot does not hold the written value")
	}

	corrupt[i] ^= 0xff

	uploads := map[string][]byte{
		"corrupt": corrupt,
		"nohash":  snapshot[:len(snapshot)-sha256.Size],
		"skip":    snapshot[:len(snapshot)-sha256.Size],
	}

	for name, data := range uploads {
		n := nodes[name]
		if _, err := secureClient(t, n).EtcdRecover(nodeCtx(t, n), bytes.NewReader(data)); err != nil {
			t.Fatalf("upload to %s: %v", name, err)
		}
	}

	for _, tc := range []struct {
		node, want string
	}{
		{"missing", "Failed to run pre stage: error verifying snapshot: stat "},
		{"corrupt", "Failed to run pre stage: error recovering from the snapshot: expected sha256 "},
		{"nohash", "Failed to run pre stage: error recovering from the snapshot: snapshot missing hash but --skip-hash-check=false"},
	} {
		n := nodes[tc.node]
		if err := secureClient(t, n).Bootstrap(nodeCtx(t, n), &machineapi.BootstrapRequest{RecoverEtcd: true}); err != nil {
			t.Fatalf("%s: Bootstrap answers at once, as on Talos: %v", tc.node, err)
		}

		ev := waitEvent(t, cluster, 30*time.Second, tc.node+" restore failure", func(e talosemu.Event) bool {
			return e.Node == tc.node && e.Kind == "etcd-restore"
		})
		if ev.Detail != "failed" || !strings.Contains(ev.Error, tc.want) {
			t.Fatalf("%s: restore event %+v; want failed with %q", tc.node, ev, tc.want)
		}

		if state, msg := etcdService(t, n); state != "Failed" || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: etcd service %s %q; want Failed with %q", tc.node, state, msg, tc.want)
		}

		if n.State() == talosemu.StateBootstrapped {
			t.Errorf("%s: etcd runs after a failed restore", tc.node)
		}
	}

	// etcdutl leaves what it wrote when the hash does not match: Bootstrap refuses from then on.
	err = secureClient(t, nodes["corrupt"]).Bootstrap(nodeCtx(t, nodes["corrupt"]), &machineapi.BootstrapRequest{RecoverEtcd: true})
	wantCode(t, err, codes.AlreadyExists)

	// Without its digest (a database copied from a data directory) it restores when told to skip
	// the check.
	skip := nodes["skip"]
	if err := secureClient(t, skip).Bootstrap(nodeCtx(t, skip), &machineapi.BootstrapRequest{RecoverEtcd: true, RecoverSkipHashCheck: true}); err != nil {
		t.Fatal(err)
	}

	waitStateFor(t, skip, 30*time.Second, talosemu.StateBootstrapped)
	wantKeys(t, skip, map[string]string{"/lab/dr/probe": value})

	if eventIndex(cluster.Events(), "skip", "bootstrap", "recover, hash check skipped") < 0 {
		t.Errorf("no recovering bootstrap event with the hash check skipped: %v", cluster.Events())
	}
}

// etcdService reports the etcd service's state and last event message from ServiceList.
func etcdService(t *testing.T, n *talosemu.Node) (state, msg string) {
	t.Helper()

	resp, err := secureClient(t, n).ServiceList(nodeCtx(t, n))
	if err != nil {
		t.Fatal(err)
	}

	for _, s := range resp.Messages[0].Services {
		if s.Id == "etcd" {
			events := s.Events.GetEvents()
			if len(events) > 0 {
				msg = events[len(events)-1].Msg
			}

			return s.State, msg
		}
	}

	t.Fatal("no etcd service")

	return "", ""
}

// EtcdSnapshot's faults, and a member that does not run.
func TestEtcdSnapshotFaults(t *testing.T) {
	t.Parallel()

	cluster := newCluster(t)
	cp := startNode(t, talosemu.Options{Cluster: cluster})

	// Maintenance mode has no EtcdSnapshot.
	rd, err := insecureClient(t, cp).EtcdSnapshot(nodeCtx(t, cp), &machineapi.EtcdSnapshotRequest{})
	if err == nil {
		_, err = io.ReadAll(rd)
	}

	wantCode(t, err, codes.Unimplemented)

	install(t, cp, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	if err := secureClient(t, cp).Bootstrap(nodeCtx(t, cp), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	waitStateFor(t, cp, 30*time.Second, talosemu.StateBootstrapped)

	for _, code := range []codes.Code{codes.Unavailable, codes.Internal} {
		cp.SetFaults(talosemu.Faults{SnapshotError: code})

		_, err := takeSnapshot(nodeCtx(t, cp), t, cp)
		wantCode(t, err, code)
	}

	if i := eventIndex(cluster.Events(), "cp-1", "etcd-snapshot", "failed"); i < 0 {
		t.Errorf("no failed snapshot event: %v", cluster.Events())
	}

	cp.SetFaults(talosemu.Faults{SnapshotTruncated: true})

	truncated, err := takeSnapshot(nodeCtx(t, cp), t, cp)
	if err != nil || len(truncated) == 0 {
		t.Fatalf("a truncated snapshot streams successfully: %d bytes, %v", len(truncated), err)
	}

	if snapshotDigestOK(truncated) == nil {
		t.Fatal("the truncated snapshot passes verification")
	}

	ev := waitEvent(t, cluster, time.Second, "truncated snapshot", func(e talosemu.Event) bool { return e.Detail == "truncated" })
	if ev.Bytes != int64(len(truncated)) {
		t.Errorf("truncated event %+v; %d bytes streamed", ev, len(truncated))
	}

	cp.SetFaults(talosemu.Faults{})
	checkSnapshot(t, mustSnapshot(t, cp))

	// A member that does not run: machined's local client waits for it until the deadline.
	cp.StopEtcd()

	ctx, cancel := context.WithTimeout(nodeCtx(t, cp), time.Second)
	defer cancel()

	_, err = takeSnapshot(ctx, t, cp)
	wantCode(t, err, codes.DeadlineExceeded)
}

func mustSnapshot(t *testing.T, n *talosemu.Node) []byte {
	t.Helper()

	data, err := takeSnapshot(nodeCtx(t, n), t, n)
	if err != nil {
		t.Fatal(err)
	}

	return data
}
