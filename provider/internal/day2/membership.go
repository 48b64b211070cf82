package day2

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Member is one etcd member as the cluster reports it.
type Member struct {
	ID      uint64
	Name    string
	Healthy bool
}

// EtcdMembers reads the member list through the first control plane of via that answers, and
// each member's health through its own Talos API (a member whose node does not answer, or whose
// EtcdStatus reports errors, is unhealthy). It is read-only.
func EtcdMembers(ctx context.Context, a Access, via []Node, all []Node) ([]Member, error) {
	var (
		list    []*machineapi.EtcdMember
		lastErr error
	)

	for _, n := range via {
		c, err := a.Talos(ctx, n.Address)
		if err != nil {
			return nil, err
		}

		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.EtcdMemberList(cctx, &machineapi.EtcdMemberListRequest{})
		cancel()
		c.Close() //nolint:errcheck

		if err != nil {
			lastErr = fmt.Errorf("%s: %w", n.Name, err)

			continue
		}

		for _, m := range resp.GetMessages() {
			list = m.GetMembers()
		}

		break
	}

	if list == nil {
		return nil, fmt.Errorf("no control plane answered the etcd member list: %w", lastErr)
	}

	address := map[string]string{}
	for _, n := range all {
		address[n.Name] = n.Address
	}

	members := make([]Member, 0, len(list))

	for _, m := range list {
		members = append(members, Member{ID: m.GetId(), Name: m.GetHostname(), Healthy: memberHealthy(ctx, a, address[m.GetHostname()])})
	}

	return members, nil
}

func memberHealthy(ctx context.Context, a Access, address string) bool {
	if address == "" {
		return false
	}

	c, err := a.Talos(ctx, address)
	if err != nil {
		return false
	}
	defer c.Close() //nolint:errcheck

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()

	st, err := c.EtcdStatus(ctx)
	if err != nil {
		return false
	}

	for _, m := range st.GetMessages() {
		if len(m.GetMemberStatus().GetErrors()) > 0 || m.GetMemberStatus().GetLeader() == 0 {
			return false
		}
	}

	return true
}

// PlanRemoval orders the removal of the members named leaving so that every step keeps etcd's
// quorum, given the members' health: unhealthy members first. It refuses (with what to do) a
// removal that would pass through a member set without quorum, or that leaves no member.
// Warnings say when the result is no longer fault tolerant.
func PlanRemoval(members []Member, leaving []string) (order []Member, warnings []string, err error) {
	var stay, go1 []Member

	for _, m := range members {
		if slices.Contains(leaving, m.Name) {
			go1 = append(go1, m)
		} else {
			stay = append(stay, m)
		}
	}

	if len(go1) == 0 {
		return nil, nil, nil
	}

	if len(stay) == 0 {
		return nil, nil, fmt.Errorf("removing %s would remove every etcd member: keep at least one control plane", names(go1))
	}

	// Dead members first: removing them only helps the quorum.
	slices.SortStableFunc(go1, func(a, b Member) int {
		switch {
		case a.Healthy == b.Healthy:
			return 0
		case !a.Healthy:
			return -1
		default:
			return 1
		}
	})

	total, healthy := len(members), 0

	for _, m := range members {
		if m.Healthy {
			healthy++
		}
	}

	var down []string

	for _, m := range members {
		if !m.Healthy {
			down = append(down, m.Name)
		}
	}

	for _, m := range go1 {
		if healthy*2 <= total {
			return nil, nil, fmt.Errorf("etcd has no quorum (%d of %d members healthy; down: %s): no member can be removed until enough "+
				"members run again", healthy, total, strings.Join(down, ", "))
		}

		total--

		if m.Healthy {
			healthy--
		}

		if healthy*2 <= total {
			return nil, nil, fmt.Errorf("removing %s would leave %d healthy of %d etcd members, without quorum (down: %s): bring %s back "+
				"first, or remove the down member(s) instead", m.Name, healthy, total, strings.Join(down, ", "), strings.Join(down, ", "))
		}
	}

	if total < 3 {
		warnings = append(warnings, fmt.Sprintf("after removing %s, etcd has %d member(s): the control plane no longer survives the loss of a node", names(go1), total))
	}

	return go1, warnings, nil
}

func names(ms []Member) string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Name)
	}

	return strings.Join(out, ", ")
}

// RemoveOptions describe the removal of nodes from a cluster.
type RemoveOptions struct {
	Access Access
	// Staying are the nodes that stay (control planes among them reach etcd).
	Staying []Node
	// Leaving are the nodes to remove.
	Leaving      []Node
	DrainTimeout time.Duration
	Timeout      time.Duration
	Progress     Progress
}

// Remove takes nodes out of the cluster before their VMs are deleted: workers are drained;
// control planes, one at a time in an order that keeps etcd's quorum, hand etcd leadership over
// and leave etcd (verified in the member list); each node is reset gracefully and its Node
// deleted. A node that does not answer has its member removed by id from a staying control
// plane, and its Node deleted: nothing waits forever. It returns warnings.
func Remove(ctx context.Context, o RemoveOptions) ([]string, error) {
	kube, err := o.Access.Kube()
	if err != nil {
		return nil, err
	}

	var cps, workers, leavingCPs []Node

	for _, n := range o.Staying {
		if n.ControlPlane {
			cps = append(cps, n)
		}
	}

	var leavingNames []string

	for _, n := range o.Leaving {
		if n.ControlPlane {
			leavingCPs = append(leavingCPs, n)
			leavingNames = append(leavingNames, n.Name)
		} else {
			workers = append(workers, n)
		}
	}

	var warnings []string

	if len(leavingCPs) > 0 {
		members, err := EtcdMembers(ctx, o.Access, cps, append(slices.Clone(cps), leavingCPs...))
		if err != nil {
			return nil, err
		}

		order, w, err := PlanRemoval(members, leavingNames)
		if err != nil {
			return nil, err
		}

		warnings = w

		for _, m := range order {
			n := leavingCPs[slices.IndexFunc(leavingCPs, func(n Node) bool { return n.Name == m.Name })]
			if err := o.removeControlPlane(ctx, kube, n, m, cps); err != nil {
				return warnings, err
			}
		}
	}

	for _, n := range workers {
		if err := o.removeWorker(ctx, kube, n); err != nil {
			return warnings, err
		}
	}

	return warnings, nil
}

func (o RemoveOptions) removeWorker(ctx context.Context, kube kubernetes.Interface, n Node) error {
	if o.answers(ctx, n) {
		_, err := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil {
			o.Progress.say("removing %s: draining", n.Name)

			if err := Drain(ctx, kube, n.Name, o.DrainTimeout, o.Progress); err != nil {
				return fmt.Errorf("removing node %s: %w", n.Name, err)
			}
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing node %s: %w", n.Name, err)
		}

		o.reset(ctx, n)
	}

	return o.deleteNode(ctx, kube, n)
}

func (o RemoveOptions) removeControlPlane(ctx context.Context, kube kubernetes.Interface, n Node, m Member, cps []Node) error {
	if m.Healthy && o.answers(ctx, n) {
		c, err := o.Access.Talos(ctx, n.Address)
		if err != nil {
			return err
		}
		defer c.Close() //nolint:errcheck

		o.Progress.say("removing %s: handing etcd leadership over and leaving etcd", n.Name)

		if _, err := c.EtcdForfeitLeadership(ctx, &machineapi.EtcdForfeitLeadershipRequest{}); err != nil {
			return fmt.Errorf("removing node %s: handing etcd leadership over: %w", n.Name, err)
		}

		if err := c.EtcdLeaveCluster(ctx, &machineapi.EtcdLeaveClusterRequest{}); err != nil {
			return fmt.Errorf("removing node %s: leaving etcd: %w", n.Name, err)
		}
	} else {
		o.Progress.say("removing %s: it does not answer; removing its etcd member %016x through the other control planes", n.Name, m.ID)

		if err := o.removeMemberByID(ctx, m, cps); err != nil {
			return err
		}
	}

	if err := poll(ctx, o.Timeout, "etcd without "+n.Name, o.Progress, func(ctx context.Context) error {
		members, err := EtcdMembers(ctx, o.Access, cps, cps)
		if err != nil {
			return err
		}

		if slices.ContainsFunc(members, func(x Member) bool { return x.ID == m.ID }) {
			return fmt.Errorf("member %s (%016x) is still listed", n.Name, m.ID)
		}

		return nil
	}); err != nil {
		return fmt.Errorf("removing node %s: %w", n.Name, err)
	}

	if o.answers(ctx, n) {
		o.reset(ctx, n)
	}

	return o.deleteNode(ctx, kube, n)
}

func (o RemoveOptions) removeMemberByID(ctx context.Context, m Member, cps []Node) error {
	var errs []error

	for _, cp := range cps {
		c, err := o.Access.Talos(ctx, cp.Address)
		if err != nil {
			return err
		}

		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err = c.EtcdRemoveMemberByID(cctx, &machineapi.EtcdRemoveMemberByIDRequest{MemberId: m.ID})
		cancel()
		c.Close() //nolint:errcheck

		if err == nil || strings.Contains(err.Error(), "NotFound") || strings.Contains(err.Error(), "not found") {
			return nil
		}

		errs = append(errs, fmt.Errorf("via %s: %w", cp.Name, err))
	}

	return fmt.Errorf("removing the etcd member of %s (%016x): %w", m.Name, m.ID, errors.Join(errs...))
}

// answers reports whether the node's Talos API answers within a few seconds.
func (o RemoveOptions) answers(ctx context.Context, n Node) bool {
	c, err := o.Access.Talos(ctx, n.Address)
	if err != nil {
		return false
	}
	defer c.Close() //nolint:errcheck

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()

	_, err = c.Version(ctx)

	return err == nil
}

// reset wipes the node's state gracefully; the VM is deleted next, so a failure only says so.
func (o RemoveOptions) reset(ctx context.Context, n Node) {
	c, err := o.Access.Talos(ctx, n.Address)
	if err != nil {
		return
	}
	defer c.Close() //nolint:errcheck

	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	if err := c.ResetGeneric(cctx, &machineapi.ResetRequest{Graceful: true, Reboot: false}); err != nil {
		o.Progress.say("removing %s: reset failed (its VM is deleted next): %v", n.Name, err)
	}
}

func (o RemoveOptions) deleteNode(ctx context.Context, kube kubernetes.Interface, n Node) error {
	err := kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing node %s: deleting its Kubernetes Node: %w", n.Name, err)
	}

	o.Progress.say("removed %s", n.Name)

	return nil
}
