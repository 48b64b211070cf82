package etcdmember_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/crypto/x509"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/etcdmember"
)

func etcdCA(t *testing.T) *x509.PEMEncodedCertificateAndKey {
	t.Helper()

	ca, err := x509.NewSelfSignedCertificateAuthority(x509.Organization("etcd"), x509.ECDSA(true))
	if err != nil {
		t.Fatal(err)
	}

	return &x509.PEMEncodedCertificateAndKey{Crt: ca.CrtPEM, Key: ca.KeyPEM}
}

// threeMembers bootstraps cp-1 on 127.<net>.0.1 and joins cp-2 and cp-3, as Talos does.
func threeMembers(t *testing.T, subnet int) ([]*etcdmember.Member, []etcdmember.Config, *x509.PEMEncodedCertificateAndKey) {
	t.Helper()

	ca := etcdCA(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	var (
		members []*etcdmember.Member
		cfgs    []etcdmember.Config
	)

	for i := 1; i <= 3; i++ {
		cfg := etcdmember.Config{
			Name: fmt.Sprintf("cp-%d", i), IP: net.ParseIP(fmt.Sprintf("127.%d.0.%d", subnet, i)),
			Dir: t.TempDir(), CA: ca, Fast: true,
		}

		var (
			m   *etcdmember.Member
			err error
		)

		if i == 1 {
			m, err = etcdmember.Bootstrap(ctx, cfg)
		} else {
			m, err = etcdmember.Join(ctx, cfg, []string{members[0].ClientURL()})
		}

		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(m.Stop)

		members = append(members, m)
		cfgs = append(cfgs, cfg)
	}

	return members, cfgs, ca
}

func client(t *testing.T, ca *x509.PEMEncodedCertificateAndKey, endpoints ...string) *clientv3.Client {
	t.Helper()

	c, err := etcdmember.NewClient(ca, endpoints...)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = c.Close() })

	return c
}

func memberNames(t *testing.T, c *clientv3.Client) []string {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	list, err := c.MemberList(clientv3.WithRequireLeader(ctx))
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, m := range list.Members {
		if m.IsLearner {
			t.Errorf("%s is still a learner", m.Name)
		}
		names = append(names, m.Name)
	}

	slices.Sort(names)

	return names
}

// TestAHardStoppedMemberStaysInTheList is what the lab hid before: a control plane whose VM is
// deleted leaves a dead etcd member behind. With two of three alive the cluster still writes.
func TestAHardStoppedMemberStaysInTheList(t *testing.T) {
	t.Parallel()

	members, _, ca := threeMembers(t, 71)
	c := client(t, ca, members[0].ClientURL(), members[1].ClientURL())

	if got := memberNames(t, c); !slices.Equal(got, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Fatalf("members = %v", got)
	}

	members[2].HardStop()

	if got := memberNames(t, c); !slices.Equal(got, []string{"cp-1", "cp-2", "cp-3"}) {
		t.Errorf("after cp-3's hard stop, members = %v; the dead member must stay listed", got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	if _, err := c.Put(clientv3.WithRequireLeader(ctx), "k", "v"); err != nil {
		t.Errorf("two of three members must still have quorum: %v", err)
	}
}

// TestTwoOfThreeStoppedLosesQuorum: the survivor cannot write, and says it has no leader.
func TestTwoOfThreeStoppedLosesQuorum(t *testing.T) {
	t.Parallel()

	members, _, ca := threeMembers(t, 72)
	c := client(t, ca, members[0].ClientURL())

	members[1].HardStop()
	members[2].HardStop()

	deadline := time.Now().Add(10 * time.Second)

	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err := c.Put(clientv3.WithRequireLeader(ctx), "k", "v")
		cancel()

		if err != nil {
			t.Logf("write on the survivor: %v", err)
			return
		}

		if time.Now().After(deadline) {
			t.Fatal("the survivor of three members still writes 10 s after two stopped: no quorum loss")
		}

		time.Sleep(50 * time.Millisecond)
	}
}

// TestRestartRejoinsAndRemovedMemberStops: a rebooted member comes back from its data directory;
// a member removed from the cluster (what EtcdLeaveCluster does, retrying while etcd refuses
// membership changes) stops.
func TestRestartRejoinsAndRemovedMemberStops(t *testing.T) {
	t.Parallel()

	members, cfgs, ca := threeMembers(t, 73)
	c := client(t, ca, members[0].ClientURL())

	members[2].Stop()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	back, err := etcdmember.Restart(ctx, cfgs[2])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Stop)

	if back.ID != members[2].ID {
		t.Errorf("restarted member id %x, was %x", back.ID, members[2].ID)
	}

	if err := etcdmember.Leave(ctx, c, back.ID); err != nil {
		t.Fatal(err)
	}

	select {
	case <-back.Stopped():
	case <-time.After(10 * time.Second):
		t.Error("a removed member keeps running")
	}

	if got := memberNames(t, c); !slices.Equal(got, []string{"cp-1", "cp-2"}) {
		t.Errorf("members = %v", got)
	}

	if _, err := etcdmember.Bootstrap(ctx, cfgs[0]); err == nil {
		t.Error("bootstrap over a data directory with data must be refused")
	}
}

// TestAStartThatNeverGetsReadyEndsWithItsContext: a member restarted while the rest of its
// cluster is dead cannot become ready (no quorum to publish itself). When the start's context
// ends, the half-started server must be stopped and Restart return: embed's Close alone blocks
// forever on a server that is neither ready nor stopping, and the lab's cleanup hung on it.
func TestAStartThatNeverGetsReadyEndsWithItsContext(t *testing.T) {
	t.Parallel()

	members, cfgs, _ := threeMembers(t, 74)
	for _, m := range members {
		m.HardStop()
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()

	type result struct {
		m   *etcdmember.Member
		err error
	}

	done := make(chan result, 1)

	go func() {
		m, err := etcdmember.Restart(ctx, cfgs[0])
		done <- result{m, err}
	}()

	var r result

	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Restart without quorum still runs 28 s after its context ended: its server's Close hangs")
	}

	if r.err == nil {
		r.m.HardStop()
		t.Fatal("a member of a cluster without quorum became ready")
	}

	t.Logf("restart without quorum: %v", r.err)

	// Nothing of the failed start is left running: the member starts again on the same ports.
	ctx, cancel = context.WithTimeout(t.Context(), time.Second)
	defer cancel()

	again, err := etcdmember.Restart(ctx, cfgs[0])
	if err == nil {
		again.HardStop()
		t.Fatal("a member of a cluster without quorum became ready")
	}

	if !strings.Contains(err.Error(), "not ready") {
		t.Errorf("second restart: %v; want the start to wait for quorum again, not to fail on a port still taken", err)
	}
}
