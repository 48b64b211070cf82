package lifecycle

import (
	"context"
	"fmt"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// NodeUpgrade keeps one node on its desired Talos image: it compares the image with what the
// node reports and, when they differ, upgrades the node in place.
type NodeUpgrade struct{}

// docNodeUpgrade describes NodeUpgrade in the schema.
const docNodeUpgrade = "Keeps one Talos node on its desired image, upgrading it in place when the version or schematic " +
	"changes (pre-gate, drain, upgrade through the Talos API, reboot, post-gate, uncordon). Registered by " +
	"TalosProxmoxCluster."

// NodeUpgradeArgs are a NodeUpgrade's inputs.
type NodeUpgradeArgs struct {
	ClusterAccess
	NodeRef
	ControlPlanes  map[string]string `pulumi:"controlPlanes" doc:"Every control plane of the cluster, hostname to IP, for the etcd gates."`
	TalosVersion   string            `pulumi:"talosVersion" doc:"The Talos version the node must run."`
	SchematicId    string            `pulumi:"schematicId" doc:"The Image Factory schematic id the node's image must carry."`
	InstallerImage string            `pulumi:"installerImage" doc:"The installer image that brings the node there."`
	Drain          bool              `pulumi:"drain" doc:"Cordon and drain the node before its reboot."`
	Waits
	CheckReady     bool `pulumi:"checkReady" doc:"Require the Kubernetes Node to be Ready before and after."`
	AllowDowngrade bool `pulumi:"allowDowngrade" doc:"Allow an older version."`
}

// NodeUpgradeState is what a NodeUpgrade last saw the node run.
type NodeUpgradeState struct {
	NodeUpgradeArgs
	RunningVersion     string `pulumi:"runningVersion" doc:"The Talos version the node reported after the last change."`
	RunningSchematicId string `pulumi:"runningSchematicId" doc:"The schematic id the node reported after the last change."`
	BootId             string `pulumi:"bootId" doc:"The node's boot id after the last change."`
}

// Annotate documents the resource.
func (r *NodeUpgrade) Annotate(an infer.Annotator) { an.Describe(r, docNodeUpgrade) }

// Annotate documents the inputs (the node's name and address more closely than NodeRef does, the
// drain more closely than Waits).
func (a *NodeUpgradeArgs) Annotate(an infer.Annotator) {
	describeFields(an, a)
	an.Describe(&a.Node, "The node's hostname (its Kubernetes Node and etcd member name).")
	an.Describe(&a.Address, "The node's IP address (Talos API on port 50000).")
	an.Describe(&a.DrainTimeout, "How long the drain may take (a duration).")
}

// Annotate documents the state.
func (s *NodeUpgradeState) Annotate(an infer.Annotator) { describeFields(an, s) }

func (a NodeUpgradeArgs) target() day2.Installed {
	return day2.Installed{Version: a.TalosVersion, Schematic: a.SchematicId}
}

// checkPath refuses a move from the Talos version from to the desired one that Talos refuses.
func (a NodeUpgradeArgs) checkPath(from string) error {
	if from == a.TalosVersion {
		return nil
	}

	if err := day2.CheckUpgradePath(from, a.TalosVersion, a.AllowDowngrade); err != nil {
		return fmt.Errorf("node %s: %w", a.Node, err)
	}

	return nil
}

// running is what the node reported after the last change.
func (s NodeUpgradeState) running() day2.Installed {
	return day2.Installed{Version: s.RunningVersion, Schematic: s.RunningSchematicId}
}

// observed records what the node reports.
func (s *NodeUpgradeState) observed(obs day2.Observed) {
	s.RunningVersion, s.RunningSchematicId, s.BootId = obs.Version, obs.Schematic, obs.BootID
}

// Create records what the node runs, upgrading it first if it does not run the desired image
// (a node adopted from an older image).
func (r *NodeUpgrade) Create(ctx context.Context, req infer.CreateRequest[NodeUpgradeArgs]) (infer.CreateResponse[NodeUpgradeState], error) {
	in := req.Inputs
	state := NodeUpgradeState{NodeUpgradeArgs: in, RunningVersion: in.TalosVersion, RunningSchematicId: in.SchematicId}

	return created(ctx, req, in.Node, state, func(ctx context.Context, in NodeUpgradeArgs) (NodeUpgradeState, error) {
		obs, err := converge(ctx, in, nil)
		state.observed(obs)

		return state, err
	})
}

// Diff shows an update exactly when the node will reboot: the desired image differs from what
// the node last reported. Other inputs (credentials, addresses, policy) change nothing on the
// node and show nothing. The upgrade path is checked here, so preview refuses what Talos refuses.
func (r *NodeUpgrade) Diff(_ context.Context, req infer.DiffRequest[NodeUpgradeArgs, NodeUpgradeState]) (infer.DiffResponse, error) {
	have := req.State.running()
	if req.Inputs.target() == have {
		return infer.DiffResponse{}, nil
	}

	if err := req.Inputs.checkPath(have.Version); err != nil {
		return infer.DiffResponse{}, err
	}

	return infer.DiffResponse{
		HasChanges: true,
		DetailedDiff: map[string]p.PropertyDiff{
			"installerImage": {Kind: p.Update},
		},
	}, nil
}

// Update upgrades the node (or, after an interrupted run that already upgraded it, checks it).
func (r *NodeUpgrade) Update(ctx context.Context, req infer.UpdateRequest[NodeUpgradeArgs, NodeUpgradeState]) (infer.UpdateResponse[NodeUpgradeState], error) {
	in := req.Inputs
	state := req.State
	state.NodeUpgradeArgs = in

	if req.DryRun {
		state.RunningVersion, state.RunningSchematicId = in.TalosVersion, in.SchematicId

		return infer.UpdateResponse[NodeUpgradeState]{Output: state}, nil
	}

	have := req.State.running()
	if err := in.checkPath(have.Version); err != nil {
		return infer.UpdateResponse[NodeUpgradeState]{}, err
	}

	start := time.Now()

	obs, err := converge(ctx, in, &have)
	if err != nil {
		return infer.UpdateResponse[NodeUpgradeState]{}, err
	}

	p.GetLogger(ctx).Infof("node %s runs %s (boot %.8s, %s)", in.Node, obs.Installed, obs.BootID, time.Since(start).Round(time.Second))
	state.observed(obs)

	return infer.UpdateResponse[NodeUpgradeState]{Output: state}, nil
}

// converge runs the node's upgrade (day2.Upgrade), which does nothing but the post-gate when the
// node already runs the target. On create (was nil), a node already on the target is only read.
func converge(ctx context.Context, in NodeUpgradeArgs, was *day2.Installed) (day2.Observed, error) {
	log := p.GetLogger(ctx)
	access := in.access()

	drainTimeout, timeout, err := in.parsed()
	if err != nil {
		return day2.Observed{}, err
	}

	cps := nodesOf(in.ControlPlanes, true)

	node := in.node()

	if was == nil {
		c, err := access.Talos(ctx, node.Address)
		if err != nil {
			return day2.Observed{}, err
		}

		obs, err := day2.WaitObserve(ctx, c, node.Name, timeout, log.InfoStatus)
		c.Close() //nolint:errcheck

		if err != nil || obs.Installed == in.target() {
			return obs, err
		}

		if err := in.checkPath(obs.Version); err != nil {
			return obs, err
		}
	}

	return day2.Upgrade(ctx, day2.UpgradeOptions{
		Access: access, Node: node, ControlPlanes: cps, Image: in.InstallerImage, Target: in.target(),
		Drain: in.Drain, DrainTimeout: drainTimeout, CheckReady: in.CheckReady, Timeout: timeout,
		Progress: log.InfoStatus,
	})
}

// NodeUpgradeKind registers NodeUpgrades.
var NodeUpgradeKind = kindOf[NodeUpgrade, NodeUpgradeArgs, Registered]()
