package lifecycle

import (
	"context"
	"fmt"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// EtcdBootstrap starts the cluster's etcd on its first control plane, once per generation of
// control plane VMs: the component replaces it with every control plane's VM, and its create does
// nothing when a control plane already runs etcd (the new VM joins it). When none does (a new
// cluster, the only control plane replaced, every one lost) it bootstraps, from a snapshot when
// one is given (Talos' disaster recovery: EtcdRecover, then Bootstrap with RecoverEtcd), so a
// replaced single control plane keeps the cluster's data. Its delete does nothing.
type EtcdBootstrap struct{}

// docEtcdBootstrap describes EtcdBootstrap in the schema.
const docEtcdBootstrap = "Bootstraps the cluster's etcd on its first control plane when no control plane runs it, from a " +
	"snapshot when one is given. Registered by TalosProxmoxCluster."

// EtcdBootstrapArgs are an EtcdBootstrap's inputs.
type EtcdBootstrapArgs struct {
	Talosconfig   string            `pulumi:"talosconfig" provider:"secret" doc:"Talos client configuration of the cluster."`
	Node          string            `pulumi:"node" doc:"The control plane that bootstraps etcd (hostname)."`
	Address       string            `pulumi:"address" doc:"Its IP address."`
	ControlPlanes map[string]string `pulumi:"controlPlanes" doc:"Every control plane, hostname to IP: one that runs etcd means there is nothing to bootstrap."`
	RecoverFrom   string            `pulumi:"recoverFrom,optional" doc:"URL of a snapshot to bootstrap etcd from; empty: an empty etcd."`
	AgeIdentity   string            `pulumi:"ageIdentity,optional" provider:"secret" doc:"age identity that decrypts the snapshot."`
	Timeout       string            `pulumi:"timeout" doc:"How long to wait for the node (a duration)."`
	Instances     map[string]string `pulumi:"instances,optional" doc:"Every control plane's VM instance, by hostname: a control plane whose VM is a new instance starts the bootstrap again."`
}

// EtcdBootstrapState is the inputs and what the create did.
type EtcdBootstrapState struct {
	EtcdBootstrapArgs
	Recovered string `pulumi:"recovered" doc:"The snapshot etcd was bootstrapped from (empty: none)."`
}

// Annotate documents the resource.
func (r *EtcdBootstrap) Annotate(an infer.Annotator) { an.Describe(r, docEtcdBootstrap) }

// Annotate documents the inputs.
func (a *EtcdBootstrapArgs) Annotate(an infer.Annotator) { describeFields(an, a) }

// Create bootstraps etcd unless it runs.
func (r *EtcdBootstrap) Create(ctx context.Context, req infer.CreateRequest[EtcdBootstrapArgs]) (infer.CreateResponse[EtcdBootstrapState], error) {
	return created(ctx, req, "bootstrap", EtcdBootstrapState{EtcdBootstrapArgs: req.Inputs}, bootstrap)
}

// bootstrap bootstraps etcd on the node, from the snapshot when one is given, unless a control
// plane runs it.
func bootstrap(ctx context.Context, in EtcdBootstrapArgs) (EtcdBootstrapState, error) {
	state := EtcdBootstrapState{EtcdBootstrapArgs: in}

	timeout, err := parseDuration("timeout", in.Timeout)
	if err != nil {
		return state, err
	}

	log := p.GetLogger(ctx)

	res, err := day2.Bootstrap(ctx, day2.BootstrapOptions{
		Access: day2.Access{Talosconfig: in.Talosconfig},
		Node:   day2.Node{Name: in.Node, Address: in.Address, ControlPlane: true}, ControlPlanes: nodesOf(in.ControlPlanes, true),
		RecoverFrom: in.RecoverFrom, AgeIdentity: in.AgeIdentity, Timeout: timeout, Progress: log.InfoStatus,
	})
	if err != nil {
		return state, fmt.Errorf("bootstrapping etcd on %s: %w", in.Node, err)
	}

	switch {
	case res.Joined:
		log.Infof("etcd already runs in the cluster: %s joins it, nothing to bootstrap", in.Node)
	case res.Recovered != nil:
		state.Recovered = res.Recovered.Location
		log.Infof("etcd bootstrapped on %s from the snapshot of revision %d (%s)", in.Node, res.Recovered.Revision, res.Recovered.Location)
	default:
		log.Infof("etcd bootstrapped on %s", in.Node)
	}

	return state, nil
}

// Diff replaces the resource when a control plane it knew has a new VM instance (a VM lost and
// created again: its create then bootstraps, or restores, if no control plane runs etcd); nothing
// else changes it: control planes added or removed join or leave the running etcd by themselves.
// (A VM replaced by the engine replaces it through replaceWith.)
func (r *EtcdBootstrap) Diff(_ context.Context, req infer.DiffRequest[EtcdBootstrapArgs, EtcdBootstrapState]) (infer.DiffResponse, error) {
	for node, was := range req.State.Instances {
		if now, ok := req.Inputs.Instances[node]; ok && now != was {
			return infer.DiffResponse{
				HasChanges: true, DeleteBeforeReplace: false,
				DetailedDiff: map[string]p.PropertyDiff{"instances": {Kind: p.UpdateReplace}},
			}, nil
		}
	}

	return infer.DiffResponse{}, nil
}

// EtcdBootstrapKind registers EtcdBootstraps.
var EtcdBootstrapKind = kindOf[EtcdBootstrap, EtcdBootstrapArgs, Registered]()
