package lifecycle

import (
	"context"
	"reflect"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// NodeRetire stands for one node's VM instance in the cluster. It is replaced with its VM, and
// the engine deletes it before that VM: its delete takes the previous instance out of the cluster
// (drain, etcd leave, reset, Node deletion) before the new one joins. When the whole cluster goes
// (the membership's delete leaves a teardown marker first) its delete does nothing.
type NodeRetire struct{}

// docNodeRetire describes NodeRetire in the schema.
const docNodeRetire = "One node's VM instance: replaced with its VM, and deleted before it, so a node kept under its " +
	"name on a new VM leaves the cluster safely first. Registered by TalosProxmoxCluster."

// NodeRetireArgs are a NodeRetire's inputs.
type NodeRetireArgs struct {
	ClusterAccess
	NodeRef
	Waits
}

// NodeRetireState is the node as it was recorded.
type NodeRetireState = NodeRetireArgs

// Annotate documents the resource.
func (r *NodeRetire) Annotate(an infer.Annotator) { an.Describe(r, docNodeRetire) }

// Annotate documents the inputs.
func (a *NodeRetireArgs) Annotate(an infer.Annotator) { describeFields(an, a) }

// Create records the node.
func (r *NodeRetire) Create(_ context.Context, req infer.CreateRequest[NodeRetireArgs]) (infer.CreateResponse[NodeRetireState], error) {
	return infer.CreateResponse[NodeRetireState]{ID: req.Inputs.Node, Output: req.Inputs}, nil
}

// Diff records changes without touching the node: only a new VM (replaceWith) retires it.
func (r *NodeRetire) Diff(_ context.Context, req infer.DiffRequest[NodeRetireArgs, NodeRetireState]) (infer.DiffResponse, error) {
	return infer.DiffResponse{HasChanges: !reflect.DeepEqual(req.Inputs, req.State)}, nil
}

// Update records the node.
func (r *NodeRetire) Update(_ context.Context, req infer.UpdateRequest[NodeRetireArgs, NodeRetireState]) (infer.UpdateResponse[NodeRetireState], error) {
	return infer.UpdateResponse[NodeRetireState]{Output: req.Inputs}, nil
}

// Delete takes the node's instance out of the cluster, unless the cluster is being torn down or
// the node already left it (a node removed from the list: the membership did it). The other
// control planes are found through Kubernetes (their Nodes), so the record does not change with
// the node list.
func (r *NodeRetire) Delete(ctx context.Context, req infer.DeleteRequest[NodeRetireState]) (infer.DeleteResponse, error) {
	in := req.State
	log := p.GetLogger(ctx)

	drainTimeout, timeout, err := in.parsed()
	if err != nil {
		return infer.DeleteResponse{}, err
	}

	did, err := day2.Retire(ctx, day2.RemoveOptions{
		Access:  in.access(),
		Leaving: []day2.Node{in.node()}, DrainTimeout: drainTimeout, Timeout: timeout, Progress: log.InfoStatus,
	})
	if err != nil {
		return infer.DeleteResponse{}, err
	}

	log.Infof("%s: %s", in.Node, did)

	return infer.DeleteResponse{}, nil
}

// NodeRetireKind registers NodeRetires.
var NodeRetireKind = kindOf[NodeRetire, NodeRetireArgs, Registered]()
