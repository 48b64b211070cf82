package lifecycle

import (
	"context"
	"fmt"
	"reflect"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/clientconfigs"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// EtcdSnapshot takes an etcd snapshot whenever its trigger changes: the component puts into the
// trigger what makes a change risky for etcd's data (the Talos and Kubernetes versions, the
// control planes and their hosts, etcdBackup.snapshotNow), and the resources that touch nodes
// depend on this one, so the engine takes the snapshot before the first node is touched, once
// per `up`. It reaches the control planes with a short-lived client certificate it issues from the
// Talos API CA itself, so it does not wait for the cluster's admin credentials (nor, with static
// addresses, for the VMs it must come before).
type EtcdSnapshot struct{}

// docEtcdSnapshot describes EtcdSnapshot in the schema.
const docEtcdSnapshot = "Takes an etcd snapshot through the Talos API whenever its trigger changes (before every change that " +
	"can lose etcd's data or quorum, and on demand), verified, optionally age-encrypted, stored and pruned. " +
	"Registered by TalosProxmoxCluster with etcdBackup."

// EtcdSnapshotArgs are an EtcdSnapshot's inputs.
type EtcdSnapshotArgs struct {
	ClusterName string `pulumi:"clusterName" doc:"The cluster's name: its snapshots live under <prefix>/<clusterName>/."`
	TalosCA
	ControlPlanes map[string]string `pulumi:"controlPlanes" doc:"The control planes that run etcd, hostname to IP; asked in name order."`
	Destination   string            `pulumi:"destination" doc:"Where snapshots go (file:// or s3:// URL)."`
	AgeRecipients []string          `pulumi:"ageRecipients,optional" doc:"age recipients snapshots are encrypted to."`
	Keep          int               `pulumi:"keep" doc:"How many of the cluster's snapshots to keep."`
	Required      bool              `pulumi:"required" doc:"Fail when the snapshot fails (else warn and go on)."`
	Trigger       string            `pulumi:"trigger" doc:"A snapshot is taken whenever this changes, unless it is empty."`
	Timeout       string            `pulumi:"timeout" doc:"How long a snapshot may take (a duration)."`
}

// EtcdSnapshotState is the inputs and the last snapshot taken (empty fields: none yet).
type EtcdSnapshotState struct {
	EtcdSnapshotArgs
	Location string `pulumi:"location" doc:"URL of the last snapshot."`
	Revision int    `pulumi:"revision" doc:"etcd revision of the last snapshot."`
	Size     int    `pulumi:"size" doc:"Size of the last snapshot in bytes (before encryption)."`
	Sha256   string `pulumi:"sha256" doc:"sha256 of the last snapshot (before encryption), hex."`
	TakenAt  string `pulumi:"takenAt" doc:"When the last snapshot was taken (RFC 3339, UTC)."`
}

// Annotate documents the resource.
func (r *EtcdSnapshot) Annotate(an infer.Annotator) { an.Describe(r, docEtcdSnapshot) }

// Annotate documents the inputs.
func (a *EtcdSnapshotArgs) Annotate(an infer.Annotator) { describeFields(an, a) }

// Annotate documents the outputs.
func (s *EtcdSnapshotState) Annotate(an infer.Annotator) { describeFields(an, s) }

// Create takes the first snapshot, unless the trigger is empty (a new cluster: nothing to keep).
func (r *EtcdSnapshot) Create(ctx context.Context, req infer.CreateRequest[EtcdSnapshotArgs]) (infer.CreateResponse[EtcdSnapshotState], error) {
	state := EtcdSnapshotState{EtcdSnapshotArgs: req.Inputs}
	if req.DryRun || req.Inputs.Trigger == "" {
		return infer.CreateResponse[EtcdSnapshotState]{ID: "etcd-snapshot", Output: state}, nil
	}

	state, err := snapshot(ctx, req.Inputs, state)

	return infer.CreateResponse[EtcdSnapshotState]{ID: "etcd-snapshot", Output: state}, err
}

// Diff shows an update when an input changed; only a changed trigger takes a snapshot.
func (r *EtcdSnapshot) Diff(_ context.Context, req infer.DiffRequest[EtcdSnapshotArgs, EtcdSnapshotState]) (infer.DiffResponse, error) {
	d := map[string]p.PropertyDiff{}
	if req.Inputs.Trigger != req.State.Trigger && req.Inputs.Trigger != "" {
		d["trigger"] = p.PropertyDiff{Kind: p.Update}
	}

	return infer.DiffResponse{HasChanges: len(d) > 0 || !reflect.DeepEqual(req.Inputs, req.State.EtcdSnapshotArgs), DetailedDiff: d}, nil
}

// Update takes a snapshot when the trigger changed (and is not empty), else keeps the last one.
func (r *EtcdSnapshot) Update(ctx context.Context, req infer.UpdateRequest[EtcdSnapshotArgs, EtcdSnapshotState]) (infer.UpdateResponse[EtcdSnapshotState], error) {
	state := req.State
	state.EtcdSnapshotArgs = req.Inputs

	if req.DryRun || req.Inputs.Trigger == "" || req.Inputs.Trigger == req.State.Trigger {
		return infer.UpdateResponse[EtcdSnapshotState]{Output: state}, nil
	}

	state, err := snapshot(ctx, req.Inputs, state)

	return infer.UpdateResponse[EtcdSnapshotState]{Output: state}, err
}

// snapshot takes one; without required, a failure is a warning and the last snapshot stays.
func snapshot(ctx context.Context, in EtcdSnapshotArgs, state EtcdSnapshotState) (EtcdSnapshotState, error) {
	log := p.GetLogger(ctx)

	timeout, err := parseDuration("timeout", in.Timeout)
	if err != nil {
		return state, err
	}

	cps := nodesOf(in.ControlPlanes, true) // in name order

	talosconfig, err := clientconfigs.Talosconfig(clientconfigs.Input{
		ClusterName:    in.ClusterName,
		OSCA:           in.certAndKey(),
		TalosEndpoints: day2.Addresses(cps), TalosNodes: day2.Addresses(cps),
		Validity: timeout + time.Hour, Now: time.Now(),
	})
	if err != nil {
		return state, err
	}

	info, err := day2.Snapshot(ctx, day2.SnapshotOptions{
		Access: day2.Access{Talosconfig: talosconfig}, ControlPlanes: cps, Cluster: in.ClusterName,
		Destination: in.Destination, AgeRecipients: in.AgeRecipients, Keep: in.Keep, Timeout: timeout,
		Progress: log.InfoStatus,
	})
	if err != nil {
		err = fmt.Errorf("etcd snapshot before the change failed, so nothing was touched: %w; fix it and run `pulumi up` "+
			"again, or set etcdBackup.required: false to go on without a snapshot", err)
		if in.Required {
			return state, err
		}

		log.Warning(err.Error())

		return state, nil
	}

	log.Infof("etcd snapshot of revision %d (%d bytes, sha256 %s) stored at %s", info.Revision, info.Size, info.SHA256, info.Location)

	state.Location, state.Revision, state.Size = info.Location, int(info.Revision), int(info.Size)
	state.Sha256, state.TakenAt = info.SHA256, info.TakenAt

	return state, nil
}

// EtcdSnapshotOutputs is the view of the EtcdSnapshot outputs the component reads.
type EtcdSnapshotOutputs struct {
	pulumi.CustomResourceState

	Location pulumi.StringOutput `pulumi:"location"`
	Revision pulumi.IntOutput    `pulumi:"revision"`
	Size     pulumi.IntOutput    `pulumi:"size"`
	Sha256   pulumi.StringOutput `pulumi:"sha256"`
	TakenAt  pulumi.StringOutput `pulumi:"takenAt"`
}

// EtcdSnapshotKind registers EtcdSnapshots.
var EtcdSnapshotKind = kindOf[EtcdSnapshot, EtcdSnapshotArgs, EtcdSnapshotOutputs]()
