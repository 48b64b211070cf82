package lifecycle

import (
	"fmt"
	"sort"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// This file holds what the resources share: the argument heads embedded in their Args (with
// their Pulumi inputs, embedded in the resources' inputs structs), and the helpers that turn
// arguments into provider/internal/day2 values.
//
// infer flattens an embedded exported struct into the properties of the struct that embeds it
// (schema, decoding, secrets) and merges its Annotate before the embedding struct's own, which
// may describe a promoted field again. A State that embeds its Args merges the Args' heads once
// more after the Args: a State whose Args describe a promoted field again repeats that in its own
// Annotate (ClusterHealthState, NodeUpgradeState).

// ClusterAccess is how a resource reaches the cluster: the inputs `talosconfig` and `kubeconfig`.
type ClusterAccess struct {
	Talosconfig string `pulumi:"talosconfig" provider:"secret"`
	Kubeconfig  string `pulumi:"kubeconfig" provider:"secret"`
}

// Annotate documents the inputs.
func (a *ClusterAccess) Annotate(an infer.Annotator) {
	an.Describe(&a.Talosconfig, "Talos client configuration of the cluster.")
	an.Describe(&a.Kubeconfig, "Admin kubeconfig of the cluster.")
}

// access is the day-2 access the arguments give.
func (a ClusterAccess) access() day2.Access {
	return day2.Access{Talosconfig: a.Talosconfig, Kubeconfig: a.Kubeconfig}
}

// ClusterAccessInputs are ClusterAccess's inputs.
type ClusterAccessInputs struct {
	// Talosconfig is the Talos client configuration of the cluster.
	Talosconfig pulumi.StringInput `pulumi:"talosconfig"`
	// Kubeconfig is the admin kubeconfig of the cluster.
	Kubeconfig pulumi.StringInput `pulumi:"kubeconfig"`
}

// NodeRef is the node a per-node resource is about: the inputs `node`, `address` and
// `controlPlane`.
type NodeRef struct {
	Node         string `pulumi:"node"`
	Address      string `pulumi:"address"`
	ControlPlane bool   `pulumi:"controlPlane"`
}

// Annotate documents the inputs.
func (n *NodeRef) Annotate(an infer.Annotator) {
	an.Describe(&n.Node, "The node's hostname.")
	an.Describe(&n.Address, "The node's IP address.")
	an.Describe(&n.ControlPlane, "Whether the node is a control plane.")
}

// node is the day-2 node the arguments name.
func (n NodeRef) node() day2.Node {
	return day2.Node{Name: n.Node, Address: n.Address, ControlPlane: n.ControlPlane}
}

// NodeRefInputs are NodeRef's inputs.
type NodeRefInputs struct {
	// Node is the node's hostname.
	Node pulumi.StringInput `pulumi:"node"`
	// Address is the node's IP address.
	Address pulumi.StringInput `pulumi:"address"`
	// ControlPlane tells whether the node is a control plane.
	ControlPlane pulumi.BoolInput `pulumi:"controlPlane"`
}

// nodesOf lists nodes (hostname to IP) sorted by name.
func nodesOf(m map[string]string, cp bool) []day2.Node {
	nodes := make([]day2.Node, 0, len(m))
	for name, addr := range m {
		nodes = append(nodes, day2.Node{Name: name, Address: addr, ControlPlane: cp})
	}

	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })

	return nodes
}

// parseDuration reads the duration argument name, which must be positive.
func parseDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration", name, v)
	}

	return d, nil
}
