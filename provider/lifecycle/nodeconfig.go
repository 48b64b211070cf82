package lifecycle

import (
	"context"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// NodeConfig keeps a running node's machine configuration current. The Talos provider's
// ConfigurationApply configures the node once, when its VM is new; every later change comes
// through here, one node at a time and after the OS and Kubernetes upgrades of the same `up`, so a
// configuration change never races an upgrade and never hits every node at once.
type NodeConfig struct{}

// NodeConfigArgs are a NodeConfig's inputs.
type NodeConfigArgs struct {
	Talosconfig   string            `pulumi:"talosconfig" provider:"secret"`
	Kubeconfig    string            `pulumi:"kubeconfig" provider:"secret"`
	Node          string            `pulumi:"node"`
	Address       string            `pulumi:"address"`
	ControlPlane  bool              `pulumi:"controlPlane"`
	ControlPlanes map[string]string `pulumi:"controlPlanes"`
	Configuration string            `pulumi:"configuration" provider:"secret"`
	CheckReady    bool              `pulumi:"checkReady"`
	Timeout       string            `pulumi:"timeout"`
}

// NodeConfigState is the configuration the node runs.
type NodeConfigState struct {
	NodeConfigArgs
}

// Annotate documents the resource.
func (r *NodeConfig) Annotate(an infer.Annotator) {
	an.Describe(r, "A running node's machine configuration: a change is applied in Talos' AUTO mode (live where Talos "+
		"can, else with a reboot that is waited for), one node at a time. Registered by TalosProxmoxCluster.")
}

// Annotate documents the inputs.
func (a *NodeConfigArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Talosconfig, "Talos client configuration of the cluster.")
	an.Describe(&a.Kubeconfig, "Admin kubeconfig of the cluster.")
	an.Describe(&a.Node, "The node's hostname.")
	an.Describe(&a.Address, "The node's IP address.")
	an.Describe(&a.ControlPlane, "Whether the node is a control plane.")
	an.Describe(&a.ControlPlanes, "All control planes, hostname to IP (the etcd gate after a reboot).")
	an.Describe(&a.Configuration, "The node's machine configuration.")
	an.Describe(&a.CheckReady, "Require the Node to be Ready after a reboot.")
	an.Describe(&a.Timeout, "How long each wait may take (a duration).")
}

func (a NodeConfigArgs) options(ctx context.Context) (day2.ConfigOptions, error) {
	timeout, err := parseDuration("timeout", a.Timeout)

	return day2.ConfigOptions{
		Access:        day2.Access{Talosconfig: a.Talosconfig, Kubeconfig: a.Kubeconfig},
		Node:          day2.Node{Name: a.Node, Address: a.Address, ControlPlane: a.ControlPlane},
		ControlPlanes: nodesOf(a.ControlPlanes, true),
		Config:        a.Configuration,
		CheckReady:    a.CheckReady,
		Timeout:       timeout,
		Progress:      p.GetLogger(ctx).InfoStatus,
	}, err
}

// Create records the configuration the Talos provider applied to the new node.
func (r *NodeConfig) Create(_ context.Context, req infer.CreateRequest[NodeConfigArgs]) (infer.CreateResponse[NodeConfigState], error) {
	return infer.CreateResponse[NodeConfigState]{ID: req.Inputs.Node, Output: NodeConfigState{req.Inputs}}, nil
}

// Diff shows an update when the configuration changes. At preview it asks the node (a dry run)
// whether Talos applies it live or needs a reboot, and says so in the log.
func (r *NodeConfig) Diff(ctx context.Context, req infer.DiffRequest[NodeConfigArgs, NodeConfigState]) (infer.DiffResponse, error) {
	if req.Inputs.Configuration == req.State.Configuration {
		return infer.DiffResponse{}, nil
	}

	if o, err := req.Inputs.options(ctx); err == nil && o.Access.Talosconfig != "" && o.Config != "" {
		describePlan(ctx, o)
	}

	return infer.DiffResponse{
		HasChanges:   true,
		DetailedDiff: map[string]p.PropertyDiff{"configuration": {Kind: p.Update}},
	}, nil
}

func describePlan(ctx context.Context, o day2.ConfigOptions) {
	log := p.GetLogger(ctx)

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	plan, err := day2.PlanConfig(ctx, o)

	switch {
	case err != nil:
		log.Warningf("%s: the configuration changes; the node could not be asked how it applies it (%v)", o.Node.Name, err)
	case plan.Unchanged:
		log.Infof("%s: already runs this configuration (upgrades earlier in the same up make it so)", o.Node.Name)
	case plan.Reboot:
		log.Warningf("%s: the configuration change needs a reboot of the node:\n%s", o.Node.Name, plan.Details)
	default:
		log.Infof("%s: the configuration change applies without a reboot", o.Node.Name)
	}
}

// Update applies the configuration.
func (r *NodeConfig) Update(ctx context.Context, req infer.UpdateRequest[NodeConfigArgs, NodeConfigState]) (infer.UpdateResponse[NodeConfigState], error) {
	state := NodeConfigState{req.Inputs}
	if req.DryRun || req.Inputs.Configuration == req.State.Configuration {
		return infer.UpdateResponse[NodeConfigState]{Output: state}, nil
	}

	o, err := req.Inputs.options(ctx)
	if err != nil {
		return infer.UpdateResponse[NodeConfigState]{}, err
	}

	start := time.Now()

	rebooted, err := day2.ApplyConfig(ctx, o)
	if err != nil {
		return infer.UpdateResponse[NodeConfigState]{}, err
	}

	how := "live, without a reboot"
	if rebooted {
		how = "with a reboot"
	}

	p.GetLogger(ctx).Infof("%s: configuration applied %s (%s)", o.Node.Name, how, time.Since(start).Round(time.Millisecond))

	return infer.UpdateResponse[NodeConfigState]{Output: state}, nil
}
