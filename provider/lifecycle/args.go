package lifecycle

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/clientconfigs"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// This file holds what the resources share: the argument heads embedded in their Args (each
// with its descriptions, in one place), and the helpers that turn arguments into
// provider/internal/day2 values.
//
// infer flattens an embedded exported struct into the properties of the struct that embeds it
// (schema, decoding, secrets). The heads have no Annotate of their own: the Annotate of the Args
// that embed them describes their fields with the rest (describeFields), and then may describe a
// promoted field more closely (MembershipArgs describes its drainTimeout more closely than Waits
// does). infer merges the Annotate of an embedded struct that has one (the Args a State embeds)
// before the embedding struct's own, so a State that embeds its Args keeps the Args'
// descriptions. A resource whose state is its inputs says so with an alias
// (type MembershipState = MembershipArgs).

// ClusterAccess is how a resource reaches the cluster: the inputs `talosconfig` and `kubeconfig`.
type ClusterAccess struct {
	Talosconfig string `pulumi:"talosconfig" provider:"secret" doc:"Talos client configuration of the cluster."`
	Kubeconfig  string `pulumi:"kubeconfig" provider:"secret" doc:"Admin kubeconfig of the cluster."`
}

// access is the day-2 access the arguments give.
func (a ClusterAccess) access() day2.Access {
	return day2.Access{Talosconfig: a.Talosconfig, Kubeconfig: a.Kubeconfig}
}

// TalosCA is the Talos API CA a resource issues its own client certificates from: the inputs
// `osCaCertificate` and `osCaKey`.
type TalosCA struct {
	OsCaCertificate string `pulumi:"osCaCertificate" doc:"The Talos API CA certificate (base64 PEM)."`
	OsCaKey         string `pulumi:"osCaKey" provider:"secret" doc:"The Talos API CA key (base64 PEM)."`
}

// certAndKey is the CA as provider/internal/clientconfigs takes it.
func (c TalosCA) certAndKey() clientconfigs.CertAndKey {
	return clientconfigs.CertAndKey{Cert: c.OsCaCertificate, Key: c.OsCaKey}
}

// NodeRef is the node a per-node resource is about: the inputs `node`, `address` and
// `controlPlane`.
type NodeRef struct {
	Node         string `pulumi:"node" doc:"The node's hostname."`
	Address      string `pulumi:"address" doc:"The node's IP address."`
	ControlPlane bool   `pulumi:"controlPlane" doc:"Whether the node is a control plane."`
}

// node is the day-2 node the arguments name.
func (n NodeRef) node() day2.Node {
	return day2.Node{Name: n.Node, Address: n.Address, ControlPlane: n.ControlPlane}
}

// ClusterNodes are the cluster's nodes by role: the inputs `controlPlanes` and `workers`.
type ClusterNodes struct {
	ControlPlanes map[string]string `pulumi:"controlPlanes" doc:"Control planes, hostname to IP."`
	Workers       map[string]string `pulumi:"workers" doc:"Workers, hostname to IP."`
}

// Waits are how long a resource that drains nodes may wait: the inputs `drainTimeout` and
// `timeout` (durations).
type Waits struct {
	DrainTimeout string `pulumi:"drainTimeout" doc:"How long draining the node may take (a duration)."`
	Timeout      string `pulumi:"timeout" doc:"How long each wait may take (a duration)."`
}

// parsed reads the durations.
func (w Waits) parsed() (drain, each time.Duration, err error) {
	if each, err = parseDuration("timeout", w.Timeout); err != nil {
		return 0, 0, err
	}

	drain, err = parseDuration("drainTimeout", w.DrainTimeout)

	return drain, each, err
}

// created is the response of a create under id whose work is do: at preview the work is not done
// and the state is preview (the inputs, the outputs unknown); a failed create records nothing.
func created[A, S any](ctx context.Context, req infer.CreateRequest[A], id string, preview S, do func(context.Context, A) (S, error)) (infer.CreateResponse[S], error) {
	if req.DryRun {
		return infer.CreateResponse[S]{ID: id, Output: preview}, nil
	}

	s, err := do(ctx, req.Inputs)
	if err != nil {
		return infer.CreateResponse[S]{}, err
	}

	return infer.CreateResponse[S]{ID: id, Output: s}, nil
}

// updated is the response of an update whose work is do, of a resource whose state is its inputs
// (A is its State too): at preview the work is not done and the state is the new inputs; a
// failed update records nothing, so the state stays what it was.
func updated[A any](ctx context.Context, req infer.UpdateRequest[A, A], do func(context.Context, A) error) (infer.UpdateResponse[A], error) {
	if req.DryRun {
		return infer.UpdateResponse[A]{Output: req.Inputs}, nil
	}

	if err := do(ctx, req.Inputs); err != nil {
		return infer.UpdateResponse[A]{}, err
	}

	return infer.UpdateResponse[A]{Output: req.Inputs}, nil
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

// describeFields describes each field of the struct s that has a `doc` tag with that tag, and
// the fields of each struct s embeds that has no Annotate of its own (an argument head) the same
// way, so a field's description stands beside it; an Annotate calls it first, then describes what
// a tag cannot (the struct itself, a promoted field described more closely, text with
// backquotes). An embedded struct with an Annotate (a State's Args) is left to infer, which merges
// its descriptions.
func describeFields[T any](an infer.Annotator, s *T) {
	describeStruct(an, reflect.ValueOf(s).Elem())
}

// annotated is the interface of a type that describes itself to infer.
var annotated = reflect.TypeFor[infer.Annotated]()

// describeStruct is describeFields of the struct value v (addressable).
func describeStruct(an infer.Annotator, v reflect.Value) {
	for i := range v.NumField() {
		f := v.Type().Field(i)

		if doc, ok := f.Tag.Lookup("doc"); ok {
			an.Describe(v.Field(i).Addr().Interface(), doc)
		} else if f.Anonymous && f.Type.Kind() == reflect.Struct && !reflect.PointerTo(f.Type).Implements(annotated) {
			describeStruct(an, v.Field(i))
		}
	}
}
