package talosemu_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/etcdmember"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// threeControlPlanes bootstraps cp-1 and waits until cp-2 and cp-3 joined its etcd.
func threeControlPlanes(t *testing.T, opts ...talosemu.Options) (*talosemu.Cluster, []*talosemu.Node) {
	t.Helper()

	cluster := newCluster(t)

	var cps []*talosemu.Node

	for i := range 3 {
		o := talosemu.Options{}
		if i < len(opts) {
			o = opts[i]
		}

		o.Cluster = cluster
		cp := startNode(t, o)
		install(t, cp, machineConfig(t, machine.TypeControlPlane, fmt.Sprintf("cp-%d", i+1)))
		cps = append(cps, cp)

		if i == 0 {
			if err := secureClient(t, cp).Bootstrap(nodeCtx(t, cp), &machineapi.BootstrapRequest{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, cp := range cps {
		waitStateFor(t, cp, 60*time.Second, talosemu.StateBootstrapped)
	}

	return cluster, cps
}

func waitStateFor(t *testing.T, n *talosemu.Node, d time.Duration, want ...talosemu.State) {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()

	if err := n.WaitState(ctx, want...); err != nil {
		t.Fatal(err)
	}
}

func memberList(t *testing.T, via *talosemu.Node) (names []string, ids map[string]uint64, err error) {
	t.Helper()

	resp, err := secureClient(t, via).EtcdMemberList(nodeCtx(t, via), &machineapi.EtcdMemberListRequest{})
	if err != nil {
		return nil, nil, err
	}

	ids = map[string]uint64{}
	for _, m := range resp.Messages[0].Members {
		names = append(names, m.Hostname)
		ids[m.Hostname] = m.Id
	}

	slices.Sort(names)

	return names, ids, nil
}

// etcdClient is a real etcd client of the cluster, with an identity from its etcd CA.
func etcdClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()

	cfg, err := configloader.NewFromBytes(machineConfig(t, machine.TypeControlPlane, "x"))
	if err != nil {
		t.Fatal(err)
	}

	c, err := etcdmember.NewClient(cfg.Cluster().Etcd().CA(), endpoints...)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	return c
}

// A deleted control-plane VM leaves a dead member behind, as on a real cluster: nothing in the
// lab repairs the membership. Removing it by id through a healthy control plane is the fix.
func TestDeletedControlPlaneLeavesADeadMember(t *testing.T) {
	t.Parallel()

	_, cps := threeControlPlanes(t)

	// The data really is in etcd: write through cp-1's member, read through cp-2's.
	ctx := nodeCtx(t, cps[0])
	if _, err := etcdClient(t, "https://"+cps[0].IP()+":2379").Put(ctx, "/lab/probe", "written"); err != nil {
		t.Fatal(err)
	}

	got, err := etcdClient(t, "https://"+cps[1].IP()+":2379").Get(ctx, "/lab/probe")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "written" {
		t.Fatalf("read through another member: %v %v", got, err)
	}

	cps[2].Close() //nolint:errcheck // the VM is deleted

	names, ids, err := memberList(t, cps[0])
	if err != nil {
		t.Fatal(err)
	}

	if strings.Join(names, ",") != "cp-1,cp-2,cp-3" {
		t.Fatalf("members after deleting cp-3's VM = %v; the dead member must stay listed", names)
	}

	// The dead member does not answer.
	sctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()

	if _, err := etcdClient(t, "https://"+cps[2].IP()+":2379").Status(sctx, "https://"+cps[2].IP()+":2379"); err == nil {
		t.Fatal("the deleted VM's etcd member still answers")
	}

	c := secureClient(t, cps[0])
	if err := c.EtcdRemoveMemberByID(nodeCtx(t, cps[0]), &machineapi.EtcdRemoveMemberByIDRequest{MemberId: ids["cp-3"]}); err != nil {
		t.Fatalf("removing the dead member: %v", err)
	}

	if names, _, err := memberList(t, cps[1]); err != nil || strings.Join(names, ",") != "cp-1,cp-2" {
		t.Fatalf("members after removing cp-3 = %v (%v)", names, err)
	}

	err = c.EtcdRemoveMemberByID(nodeCtx(t, cps[0]), &machineapi.EtcdRemoveMemberByIDRequest{MemberId: ids["cp-3"]})
	wantCode(t, err, codes.NotFound)
}

// Two of three members stopped: the survivor has no leader and refuses what needs quorum.
func TestQuorumLossIsReal(t *testing.T) {
	t.Parallel()

	_, cps := threeControlPlanes(t)

	cps[1].Close() //nolint:errcheck
	cps[2].Close() //nolint:errcheck

	deadline := time.Now().Add(20 * time.Second)

	for {
		_, _, err := memberList(t, cps[0])
		if err != nil && strings.Contains(err.Error(), "etcdserver: no leader") {
			break
		}

		if time.Now().After(deadline) {
			t.Fatalf("member list on the survivor: %v; want etcdserver: no leader", err)
		}

		time.Sleep(100 * time.Millisecond)
	}

	st, err := secureClient(t, cps[0]).EtcdStatus(nodeCtx(t, cps[0]))
	if err != nil {
		t.Fatal(err)
	}

	if ms := st.Messages[0].MemberStatus; ms.Leader != 0 || !slices.Contains(ms.Errors, "etcdserver: no leader") {
		t.Fatalf("status without quorum: leader %x, errors %v", ms.Leader, ms.Errors)
	}
}

// Leaving, forfeiting leadership and rebooting behave as on Talos.
func TestLeaveForfeitAndReboot(t *testing.T) {
	t.Parallel()

	_, cps := threeControlPlanes(t)

	// Find the leader from EtcdStatus and move the leadership away from it.
	leader, others := -1, []int{}

	for i, cp := range cps {
		st, err := secureClient(t, cp).EtcdStatus(nodeCtx(t, cp))
		if err != nil {
			t.Fatal(err)
		}

		if ms := st.Messages[0].MemberStatus; ms.Leader == ms.MemberId {
			leader = i
		} else {
			others = append(others, i)
		}
	}

	if leader < 0 || len(others) != 2 {
		t.Fatalf("leader %d, others %v", leader, others)
	}

	f, err := secureClient(t, cps[others[0]]).EtcdForfeitLeadership(nodeCtx(t, cps[others[0]]), &machineapi.EtcdForfeitLeadershipRequest{})
	if err != nil || f.Messages[0].Member != "" {
		t.Fatalf("forfeit on a follower: %v %v; want no new leader", f, err)
	}

	f, err = secureClient(t, cps[leader]).EtcdForfeitLeadership(nodeCtx(t, cps[leader]), &machineapi.EtcdForfeitLeadershipRequest{})
	if err != nil || f.Messages[0].Member == "" || f.Messages[0].Member == cps[leader].Hostname() {
		t.Fatalf("forfeit on the leader: %v %v", f, err)
	}

	// A reboot stops the member and starts it again from its data: same id.
	_, before, err := memberList(t, cps[1])
	if err != nil {
		t.Fatal(err)
	}

	if err := secureClient(t, cps[1]).Reboot(nodeCtx(t, cps[1])); err != nil {
		t.Fatal(err)
	}

	waitStateFor(t, cps[1], 10*time.Second, talosemu.StateRebooting, talosemu.StateInstalled)
	waitStateFor(t, cps[1], 30*time.Second, talosemu.StateBootstrapped)

	if _, after, err := memberList(t, cps[1]); err != nil || after["cp-2"] != before["cp-2"] || len(after) != 3 {
		t.Fatalf("members after reboot = %v (%v), before %v", after, err, before)
	}

	// cp-3 leaves: two members remain, its etcd stops and its data is gone.
	if err := secureClient(t, cps[2]).EtcdLeaveCluster(nodeCtx(t, cps[2]), &machineapi.EtcdLeaveClusterRequest{}); err != nil {
		t.Fatal(err)
	}

	if names, _, err := memberList(t, cps[0]); err != nil || strings.Join(names, ",") != "cp-1,cp-2" {
		t.Fatalf("members after cp-3 left = %v (%v)", names, err)
	}

	if cps[2].State() != talosemu.StateInstalled {
		t.Fatalf("cp-3 after leaving is %v; want installed (etcd stopped)", cps[2].State())
	}

	_, err = secureClient(t, cps[2]).EtcdStatus(nodeCtx(t, cps[2]))
	wantCode(t, err, codes.Unavailable)
}

// A VM powered off and on again boots its installed configuration from its disk, and its etcd
// member comes back with its data.
func TestPowerCycleKeepsTheDisk(t *testing.T) {
	t.Parallel()

	disk, err := talosemu.NewSystemDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	cluster, cps := threeControlPlanes(t, talosemu.Options{}, talosemu.Options{Disk: disk})

	_, before, err := memberList(t, cps[0])
	if err != nil {
		t.Fatal(err)
	}

	addr := cps[1].IP()
	cps[1].Close() //nolint:errcheck // power off

	if !disk.Installed() {
		t.Fatal("the disk lost the configuration at power-off")
	}

	again := startNode(t, talosemu.Options{Address: addr, Cluster: cluster, Disk: disk})
	waitStateFor(t, again, 30*time.Second, talosemu.StateBootstrapped)

	if again.Hostname() != "cp-2" {
		t.Fatalf("hostname after power cycle = %q", again.Hostname())
	}

	_, after, err := memberList(t, cps[0])
	if err != nil || after["cp-2"] != before["cp-2"] || len(after) != 3 {
		t.Fatalf("members after the power cycle = %v (%v), before %v", after, err, before)
	}

	if _, err := secureClient(t, again).ServiceList(nodeCtx(t, again)); err != nil {
		t.Fatal(err)
	}
}

// A VM powered off while its etcd member is still starting is off at once: the start ends with
// the machine. Here the member can never start (the other control planes' VMs are deleted, so
// it waits for a quorum that is gone); closing its node used to hang forever on etcd's Close.
func TestPowerOffDuringAnEtcdStart(t *testing.T) {
	t.Parallel()

	disk, err := talosemu.NewSystemDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	cluster, cps := threeControlPlanes(t, talosemu.Options{}, talosemu.Options{Disk: disk})

	addr := cps[1].IP()
	for _, cp := range cps {
		cp.Close() //nolint:errcheck // every VM off; only cp-2's disk survives
	}

	again := startNode(t, talosemu.Options{Address: addr, Cluster: cluster, Disk: disk})
	// Installed: the node is up and its etcd service started the member from its disk.
	waitStateFor(t, again, 30*time.Second, talosemu.StateInstalled)

	closed := make(chan struct{})

	go func() {
		defer close(closed)
		again.Close() //nolint:errcheck // never fails
	}()

	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("powering off a node whose etcd member is starting still runs after 30 s")
	}

	if got := again.State(); got != talosemu.StateClosed {
		t.Errorf("state after power-off = %v", got)
	}
}
