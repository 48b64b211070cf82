package lifecycle

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// Membership keeps the cluster's membership in step with its node list: when nodes leave the
// list, its update takes them out of the cluster (drain, etcd, reset, Node) before the engine
// deletes their VMs. Its delete does nothing, so `pulumi destroy` tears the cluster down at once.
type Membership struct{}

// docMembership describes Membership in the schema.
const docMembership = "Takes nodes removed from the cluster's node list out of the cluster safely (drain, etcd leave with " +
	"quorum protection, reset, Node deletion) before their VMs are deleted. Registered by TalosProxmoxCluster."

// MembershipArgs are a Membership's inputs.
type MembershipArgs struct {
	ClusterAccess
	Nodes map[string]MemberNode `pulumi:"nodes" doc:"The cluster's nodes by hostname."`
	Waits
}

// MembershipState is the node list the cluster was last brought to.
type MembershipState = MembershipArgs

// Annotate documents the resource.
func (r *Membership) Annotate(an infer.Annotator) { an.Describe(r, docMembership) }

// Annotate documents the inputs (the drain more closely than Waits does).
func (a *MembershipArgs) Annotate(an infer.Annotator) {
	describeFields(an, a)
	an.Describe(&a.DrainTimeout, "How long draining a leaving worker may take (a duration).")
}

// MemberNode is one node of the membership.
type MemberNode struct {
	Address      string `pulumi:"address" doc:"The node's IP address."`
	ControlPlane bool   `pulumi:"controlPlane" doc:"Whether the node is a control plane."`
}

// Annotate documents a node.
func (n *MemberNode) Annotate(an infer.Annotator) {
	describeFields(an, n)
	an.Describe(n, "One node of the cluster's membership.")
}

// node is the day-2 node the membership lists under name.
func (n MemberNode) node(name string) day2.Node {
	return day2.Node{Name: name, Address: n.Address, ControlPlane: n.ControlPlane}
}

// split is the day-2 nodes of names.
func (a MembershipArgs) split(names []string) (nodes []day2.Node) {
	for _, name := range names {
		nodes = append(nodes, a.Nodes[name].node(name))
	}

	return nodes
}

// leaving lists the nodes of old that new no longer has. A node kept under its name is not
// leaving, even at a new address (a replaced VM, or one whose DHCP address is not known at
// preview): its etcd member and Node now belong to the new machine and must not be removed.
func leaving(old, new MembershipArgs) []string {
	var out []string

	for name := range old.Nodes {
		if _, ok := new.Nodes[name]; !ok {
			out = append(out, name)
		}
	}

	sort.Strings(out)

	return out
}

func (a MembershipArgs) names() []string {
	out := make([]string, 0, len(a.Nodes))
	for name := range a.Nodes {
		out = append(out, name)
	}

	sort.Strings(out)

	return out
}

// Delete runs only when the whole cluster goes (`pulumi destroy`, or the component removed from
// the program): it leaves the teardown marker, so the nodes' retirements do nothing, and drains
// nothing itself.
func (r *Membership) Delete(ctx context.Context, req infer.DeleteRequest[MembershipState]) (infer.DeleteResponse, error) {
	if err := day2.MarkTeardown(ctx, day2.Access{Kubeconfig: req.State.Kubeconfig}); err != nil {
		p.GetLogger(ctx).Debugf("teardown marker not written (%v): the nodes' retirements find the cluster gone", err)
	}

	return infer.DeleteResponse{}, nil
}

// Create records the membership.
func (r *Membership) Create(_ context.Context, req infer.CreateRequest[MembershipArgs]) (infer.CreateResponse[MembershipState], error) {
	return infer.CreateResponse[MembershipState]{ID: "membership", Output: req.Inputs}, nil
}

// Diff shows an update when nodes leave (or join: they are recorded). Removing control planes is
// checked against what etcd reports (read-only), so preview refuses a removal that would lose
// quorum; when etcd cannot be reached the check waits for the update.
func (r *Membership) Diff(ctx context.Context, req infer.DiffRequest[MembershipArgs, MembershipState]) (infer.DiffResponse, error) {
	gone := leaving(req.State, req.Inputs)
	if len(gone) == 0 {
		return infer.DiffResponse{HasChanges: !reflect.DeepEqual(req.State.Nodes, req.Inputs.Nodes)}, nil
	}

	old := req.State
	if old.Talosconfig == "" {
		old.Talosconfig = req.Inputs.Talosconfig
	}

	if err := checkQuorum(ctx, old, req.Inputs, gone); err != nil {
		return infer.DiffResponse{}, err
	}

	return infer.DiffResponse{HasChanges: true, DetailedDiff: map[string]p.PropertyDiff{"nodes": {Kind: p.Update}}}, nil
}

// checkQuorum refuses a removal of control planes that etcd's health does not allow.
func checkQuorum(ctx context.Context, old, new MembershipArgs, gone []string) error {
	var cpsGone []string

	for _, name := range gone {
		if old.Nodes[name].ControlPlane {
			cpsGone = append(cpsGone, name)
		}
	}

	if len(cpsGone) == 0 {
		return nil
	}

	var staying []day2.Node

	for _, n := range new.split(new.names()) {
		if n.ControlPlane && !slices.Contains(cpsGone, n.Name) {
			staying = append(staying, n)
		}
	}

	if len(staying) == 0 {
		return fmt.Errorf("nodes: removing %v would remove every control plane; keep at least one", cpsGone)
	}

	access := day2.Access{Talosconfig: old.Talosconfig}

	members, err := day2.EtcdMembers(ctx, access, staying, append(staying, old.split(cpsGone)...))
	if err != nil {
		p.GetLogger(ctx).Warningf("could not read etcd's members at preview (%v); the removal is checked again before anything is touched", err)

		return nil
	}

	if _, _, err := day2.PlanRemoval(members, cpsGone); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}

	return nil
}

// Update takes the leaving nodes out of the cluster.
func (r *Membership) Update(ctx context.Context, req infer.UpdateRequest[MembershipArgs, MembershipState]) (infer.UpdateResponse[MembershipState], error) {
	return updated(ctx, req, func(ctx context.Context, in MembershipArgs) error {
		return remove(ctx, req.State, in)
	})
}

// remove takes the nodes of old that in no longer lists out of the cluster.
func remove(ctx context.Context, old, in MembershipArgs) error {
	gone := leaving(old, in)
	if len(gone) == 0 {
		return nil
	}

	drainTimeout, timeout, err := in.parsed()
	if err != nil {
		return err
	}

	log := p.GetLogger(ctx)

	var staying []day2.Node

	for _, n := range in.split(in.names()) {
		if !slices.Contains(gone, n.Name) {
			staying = append(staying, n)
		}
	}

	warnings, err := day2.Remove(ctx, day2.RemoveOptions{
		Access:  in.access(),
		Staying: staying, Leaving: old.split(gone), DrainTimeout: drainTimeout, Timeout: timeout,
		Progress: log.InfoStatus,
	})
	for _, w := range warnings {
		log.Warning(w)
	}

	if err != nil {
		return err
	}

	log.Infof("removed from the cluster: %v", gone)

	return nil
}

// MembershipKind registers Memberships.
var MembershipKind = kindOf[Membership, MembershipArgs, Registered]()
