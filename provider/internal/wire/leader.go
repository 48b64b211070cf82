package wire

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/await"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/proxmox"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// leaderWait bounds how long Construct waits for the cluster's credentials and addresses (known
// at once for a running cluster, from the state) and then for an answer from etcd.
const leaderWait = 20 * time.Second

// ControlPlaneOrder is the order control planes are upgraded and reconfigured in: by name, with
// the one that leads etcd last. A rollout then moves leadership once, when it reaches that node,
// instead of again whenever the next node in line happens to lead, and never hands it to a node
// that still has its reboot ahead. The leader is read from the running cluster through the
// upgrades' etcd gate (day2.EtcdHealthy); a new cluster, or one whose etcd does not answer
// healthy, keeps the order by name (and the leader still hands over before
// its reboot, see day2.Upgrade). A preview does not ask: it runs nothing, so the order does not
// show in it, and the leader may change before the up anyway.
func ControlPlaneOrder(s Scope, inv *proxmox.Inventory, addrs Addresses, r *Running) []spec.Node {
	cps := s.Cluster.ControlPlanes()
	if len(cps) < 2 || s.Ctx.DryRun() || !runs(s.Cluster.Name, inv, cps) {
		return cps
	}

	leader, err := etcdLeader(s.Ctx.Context(), r.Talosconfig, addrs, cps)
	if err != nil {
		_ = s.Ctx.Log.Debug("control planes upgrade in name order: "+err.Error(), &pulumi.LogArgs{Resource: s.Parent})

		return cps
	}

	return leaderLast(cps, leader)
}

// leaderLast moves the node named leader to the end, keeping the others' order.
func leaderLast(cps []spec.Node, leader string) []spec.Node {
	i := slices.IndexFunc(cps, func(n spec.Node) bool { return n.Name == leader })
	if i < 0 {
		return cps
	}

	out := slices.Concat(cps[:i:i], cps[i+1:])

	return append(out, cps[i])
}

// runs reports whether at least two of the control planes already have their VM: only then is
// there an etcd cluster to ask.
func runs(cluster string, inv *proxmox.Inventory, cps []spec.Node) bool {
	have := 0

	for _, n := range cps {
		if inv.HasVM(cluster, n.Name) {
			have++
		}
	}

	return have >= 2
}

// etcdLeader asks the running cluster which control plane leads etcd, through the credentials and
// addresses of this program (their values from the state, for a running cluster).
func etcdLeader(ctx context.Context, talosconfigOutput pulumi.StringOutput, addrs Addresses, cps []spec.Node) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()

	talosconfig, err := await.Value[string](ctx, talosconfigOutput)
	if err != nil {
		return "", fmt.Errorf("the talosconfig: %w", err)
	}

	nodes := make([]day2.Node, 0, len(cps))

	for _, n := range cps {
		address, err := await.Value[string](ctx, addrs[n.Name])
		if err != nil {
			return "", fmt.Errorf("the address of %s: %w", n.Name, err)
		}

		nodes = append(nodes, day2.Node{Name: n.Name, Address: address, ControlPlane: true})
	}

	// The upgrades' own etcd gate: a cluster whose etcd is not healthy has no order worth
	// choosing, as every node's pre-gate then waits for etcd first.
	view, err := day2.EtcdHealthy(ctx, day2.Access{Talosconfig: talosconfig}, nodes)
	if err != nil {
		return "", fmt.Errorf("reading the etcd leader: %w", err)
	}

	if view.Leader == "" {
		return "", fmt.Errorf("no control plane leads etcd")
	}

	return view.Leader, nil
}
