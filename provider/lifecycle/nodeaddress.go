package lifecycle

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/discover"
)

// NodeAddress finds a DHCP node's address once its VM runs: by the QEMU guest agent's report
// when the agent answers, else by scanning the node subnet for the Talos maintenance API and
// matching the VM's MAC address. A Talos node in maintenance mode runs no extension, so its guest
// agent does not answer before the configuration is applied (siderolabs/talos#11651), and waiting
// for it alone never ends.
type NodeAddress struct{}

// docNodeAddress describes NodeAddress in the schema.
const docNodeAddress = "The address of a DHCP node, found by its MAC address on the node subnet (or reported by its QEMU " +
	"guest agent). Registered by TalosProxmoxCluster."

// NodeAddressArgs are a NodeAddress's inputs.
type NodeAddressArgs struct {
	Node         string `pulumi:"node" doc:"The node's hostname."`
	MacAddress   string `pulumi:"macAddress,optional" doc:"The MAC address of the VM's NIC."`
	Subnet       string `pulumi:"subnet" doc:"The node subnet to scan (CIDR)."`
	AgentAddress string `pulumi:"agentAddress,optional" doc:"The IPv4 address the guest agent reported, if it did."`
	Timeout      string `pulumi:"timeout" doc:"How long the search may take (a duration)."`
}

// NodeAddressState is the address found.
type NodeAddressState struct {
	NodeAddressArgs
	Address string `pulumi:"address"`
	// How is "guest agent" or "maintenance API scan".
	How string `pulumi:"how"`
}

// Annotate documents the resource.
func (r *NodeAddress) Annotate(an infer.Annotator) { an.Describe(r, docNodeAddress) }

// Annotate documents the inputs.
func (a *NodeAddressArgs) Annotate(an infer.Annotator) { describeFields(an, a) }

// Create finds the address (at preview it is unknown).
func (r *NodeAddress) Create(ctx context.Context, req infer.CreateRequest[NodeAddressArgs]) (infer.CreateResponse[NodeAddressState], error) {
	return created(ctx, req, req.Inputs.Node, NodeAddressState{NodeAddressArgs: req.Inputs}, find)
}

// find finds the node's address: the one its guest agent reported, else the one whose Talos
// maintenance API answers with the VM's MAC address.
func find(ctx context.Context, in NodeAddressArgs) (NodeAddressState, error) {
	switch {
	case in.AgentAddress != "":
		return NodeAddressState{NodeAddressArgs: in, Address: in.AgentAddress, How: "guest agent"}, nil
	case in.MacAddress == "":
		return NodeAddressState{}, fmt.Errorf("node %s: the VM reports no MAC address for its NIC", in.Node)
	}

	timeout, err := parseDuration("timeout", in.Timeout)
	if err != nil {
		return NodeAddressState{}, err
	}

	subnet, err := netip.ParsePrefix(in.Subnet)
	if err != nil {
		return NodeAddressState{}, fmt.Errorf("subnet: %q is not a CIDR", in.Subnet)
	}

	log := p.GetLogger(ctx)

	a, err := discover.WaitForMAC(ctx, subnet, in.MacAddress, timeout, func(elapsed time.Duration) {
		log.InfoStatusf("looking for node %s (MAC %s) on %s: no Talos API with that NIC answered yet (%s)",
			in.Node, in.MacAddress, subnet, elapsed.Round(time.Second))
	})
	if err != nil {
		return NodeAddressState{}, fmt.Errorf("node %s: %w; check that the VM got a DHCP lease on "+
			"network.gateway's subnet (%s) and that this machine reaches it on port 50000, or give the node a static ip", in.Node, err, subnet)
	}

	log.Infof("node %s is at %s (found by its MAC address %s)", in.Node, a, in.MacAddress)

	return NodeAddressState{NodeAddressArgs: in, Address: a.String(), How: "maintenance API scan"}, nil
}

// Diff replaces the address when the VM (its MAC) or the subnet changes; a new agent report or
// timeout is recorded without a search.
func (r *NodeAddress) Diff(_ context.Context, req infer.DiffRequest[NodeAddressArgs, NodeAddressState]) (infer.DiffResponse, error) {
	old, in := req.State.NodeAddressArgs, req.Inputs
	d := map[string]p.PropertyDiff{}

	if old.MacAddress != in.MacAddress {
		d["macAddress"] = p.PropertyDiff{Kind: p.UpdateReplace}
	}

	if old.Subnet != in.Subnet {
		d["subnet"] = p.PropertyDiff{Kind: p.UpdateReplace}
	}

	if old.Node != in.Node {
		d["node"] = p.PropertyDiff{Kind: p.UpdateReplace}
	}

	if len(d) == 0 && (old.Timeout != in.Timeout) {
		d["timeout"] = p.PropertyDiff{Kind: p.Update}
	}

	return infer.DiffResponse{HasChanges: len(d) > 0, DetailedDiff: d, DeleteBeforeReplace: true}, nil
}

// Update records the new inputs; the address stays.
func (r *NodeAddress) Update(_ context.Context, req infer.UpdateRequest[NodeAddressArgs, NodeAddressState]) (infer.UpdateResponse[NodeAddressState], error) {
	s := req.State
	s.Timeout = req.Inputs.Timeout

	return infer.UpdateResponse[NodeAddressState]{Output: s}, nil
}

// NodeAddressOutputs is the view of the NodeAddress outputs the component reads (NodeAddressState).
type NodeAddressOutputs struct {
	pulumi.CustomResourceState

	// Address is the address found.
	Address pulumi.StringOutput `pulumi:"address"`
}

// NodeAddressKind registers NodeAddresses.
var NodeAddressKind = kindOf[NodeAddress, NodeAddressArgs, NodeAddressOutputs]()
