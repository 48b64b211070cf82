package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/redact"
)

// NodeConfig keeps a running node's machine configuration current. The Talos provider's
// ConfigurationApply configures the node once, when its VM is new; every later change comes
// through here, one node at a time and after the OS and Kubernetes upgrades of the same `up`, so a
// configuration change never races an upgrade and never hits every node at once.
type NodeConfig struct{}

// docNodeConfig describes NodeConfig in the schema.
const docNodeConfig = "A running node's machine configuration: a change is applied in Talos' AUTO mode (live where Talos " +
	"can, else with a reboot that is waited for), one node at a time. Registered by TalosProxmoxCluster."

// NodeConfigArgs are a NodeConfig's inputs.
type NodeConfigArgs struct {
	ClusterAccess
	NodeRef
	ControlPlanes map[string]string `pulumi:"controlPlanes" doc:"All control planes, hostname to IP (the etcd gate after a reboot)."`
	Configuration string            `pulumi:"configuration" provider:"secret" doc:"The node's machine configuration."`
	// RedactedConfiguration is what a preview shows of the configuration: Pulumi shows a changed
	// property as the old output against the new input, so the redacted form is an input too.
	RedactedConfiguration string `pulumi:"redactedConfiguration,optional" doc:"The machine configuration with every secret value replaced by its fingerprint (<redacted sha256:…>): what a preview's diff shows."`
	CheckReady            bool   `pulumi:"checkReady" doc:"Require the Node to be Ready after a reboot."`
	Adopted               bool   `pulumi:"adopted,optional" doc:"The node was configured before the component knew it (an adopted cluster): the first configuration is applied only where it differs from what the node runs."`
	Timeout               string `pulumi:"timeout" doc:"How long each wait may take (a duration)."`
}

// NodeConfigState is the configuration the node runs.
type NodeConfigState = NodeConfigArgs

// Annotate documents the resource.
func (r *NodeConfig) Annotate(an infer.Annotator) { an.Describe(r, docNodeConfig) }

// Annotate documents the inputs.
func (a *NodeConfigArgs) Annotate(an infer.Annotator) {
	describeFields(an, a)
}

func (a NodeConfigArgs) options(ctx context.Context) (day2.ConfigOptions, error) {
	timeout, err := parseDuration("timeout", a.Timeout)

	return day2.ConfigOptions{
		Access:        a.access(),
		Node:          a.node(),
		ControlPlanes: nodesOf(a.ControlPlanes, true),
		Config:        a.Configuration,
		CheckReady:    a.CheckReady,
		Timeout:       timeout,
		Progress:      p.GetLogger(ctx).InfoStatus,
	}, err
}

// Create records the configuration the Talos provider applied to the new node. An adopted
// node's configuration was applied by whatever made the cluster: it is read, and the declared
// one applied only where it differs (the preview says what changes, and whether live).
func (r *NodeConfig) Create(ctx context.Context, req infer.CreateRequest[NodeConfigArgs]) (infer.CreateResponse[NodeConfigState], error) {
	resp := infer.CreateResponse[NodeConfigState]{ID: req.Inputs.Node, Output: req.Inputs}
	if !req.Inputs.Adopted {
		return resp, nil
	}

	o, err := req.Inputs.options(ctx)
	if err != nil {
		return resp, err
	}

	if req.DryRun && (o.Access.Talosconfig == "" || o.Config == "") {
		return resp, nil // not known at this preview: the up reads the node
	}

	running, err := readRunning(ctx, o)
	if err != nil {
		return resp, fmt.Errorf("reading the configuration the adopted node %s runs: %w", o.Node.Name, err)
	}

	switch {
	case day2.SameConfig(running, o.Config) && req.DryRun:
		p.GetLogger(ctx).Infof("%s: adopted: runs the declared configuration already; nothing will be applied", o.Node.Name)
		return resp, nil
	case day2.SameConfig(running, o.Config):
		p.GetLogger(ctx).Infof("%s: adopted: runs the declared configuration already; nothing applied", o.Node.Name)
		return resp, o.SyncWorker(ctx)
	case req.DryRun:
		describePlan(ctx, o, running)
		return resp, nil
	}

	_, summary, _ := redactedDiff(running, o.Config, "running on "+o.Node.Name, "declared")
	p.GetLogger(ctx).Infof("%s: adopted: applying the declared configuration (%s)", o.Node.Name, summary)

	if _, err := r.Update(ctx, infer.UpdateRequest[NodeConfigArgs, NodeConfigState]{Inputs: req.Inputs}); err != nil {
		return resp, err
	}

	return resp, nil
}

// Diff shows an update when the declared configuration differs from what the node runs: a
// change of the declared one, or drift (a configuration applied behind the stack's back, which
// the next `up` replaces). It logs, per node, the documents and fields that change and whether
// Talos applies them live or reboots, and for drift the redacted diff; Pulumi shows the redacted
// configuration's line diff (the recorded against the declared).
func (r *NodeConfig) Diff(ctx context.Context, req infer.DiffRequest[NodeConfigArgs, NodeConfigState]) (infer.DiffResponse, error) {
	declaredChange := !day2.SameConfig(req.Inputs.Configuration, req.State.Configuration)

	o, err := req.Inputs.options(ctx)
	if err != nil || o.Access.Talosconfig == "" || o.Config == "" { // unknown at preview: a cluster being replaced
		if !declaredChange {
			return infer.DiffResponse{}, nil
		}

		return changed(req), nil
	}

	if !declaredChange {
		if !ConfigDiffs() {
			return infer.DiffResponse{}, nil
		}

		running, err := readRunning(ctx, o)
		if err != nil {
			p.GetLogger(ctx).Infof("%s: could not read the configuration the node runs, so drift is not checked (%v)", o.Node.Name, err)
			return infer.DiffResponse{}, nil
		}

		if day2.SameConfig(running, o.Config) {
			return infer.DiffResponse{}, nil
		}

		reportDrift(ctx, o.Node.Name, running, o.Config)

		return infer.DiffResponse{HasChanges: true, DetailedDiff: map[string]p.PropertyDiff{"configuration": {Kind: p.Update}}}, nil
	}

	describePlan(ctx, o, req.State.Configuration)

	return changed(req), nil
}

// changed is the diff of a declared change: the configuration, and its redacted form when the
// state has one to show it against.
func changed(req infer.DiffRequest[NodeConfigArgs, NodeConfigState]) infer.DiffResponse {
	detailed := map[string]p.PropertyDiff{"configuration": {Kind: p.Update}}
	if req.State.RedactedConfiguration != req.Inputs.RedactedConfiguration {
		detailed["redactedConfiguration"] = p.PropertyDiff{Kind: p.Update}
	}

	return infer.DiffResponse{HasChanges: true, DetailedDiff: detailed}
}

// readRunning reads what the node runs, waiting at most 10 s: a preview never hangs on a node.
func readRunning(ctx context.Context, o day2.ConfigOptions) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	return day2.RunningConfig(ctx, o.Access, o.Node)
}

// reportDrift warns that node runs another configuration than the one declared (and recorded),
// with the redacted diff from the running one to the declared one.
func reportDrift(ctx context.Context, node, running, declared string) {
	diff, summary, _ := redactedDiff(running, declared, "running on "+node, "declared")
	p.GetLogger(ctx).Warningf("%s: drift: the node runs a configuration this stack did not apply (%s); the next up applies the declared one:\n%s",
		node, summary, diff)
}

// redactedDiff is the redacted line diff from one configuration to another and the summary of
// what changes, or why neither could be shown.
func redactedDiff(from, to, fromName, toName string) (diff, summary string, changes []redact.Change) {
	a, errA := redact.Config(from)
	b, errB := redact.Config(to)

	if err := errors.Join(errA, errB); err != nil {
		return "", "the configurations could not be compared: " + err.Error(), nil
	}

	diff, err := redact.Diff(a, b, fromName, toName)
	if err != nil {
		return "", err.Error(), nil
	}

	if changes, err = redact.Changes(a, b); err != nil {
		return diff, err.Error(), nil
	}

	return diff, redact.Summary(changes), changes
}

// liveFields are the v1alpha1 fields Talos before v1.14 changes without a reboot (machined's
// CanApplyImmediate); a change of any other v1alpha1 field reboots, other documents apply live.
// From v1.14 Talos applies every change live and the node says so.
var liveFields = []string{
	".debug", ".cluster", ".machine.ca", ".machine.acceptedCAs", ".machine.time", ".machine.certSANs", ".machine.install",
	".machine.network", ".machine.sysfs", ".machine.sysctls", ".machine.logging", ".machine.controlPlane", ".machine.kubelet",
	".machine.kernel", ".machine.registries", ".machine.pods", ".machine.seccompProfiles", ".machine.nodeAnnotations",
	".machine.nodeLabels", ".machine.nodeTaints", ".machine.features.kubernetesTalosAPIAccess", ".machine.features.kubePrism",
	".machine.features.hostDNS", ".machine.features.imageCache", ".machine.features.nodeAddressSortAlgorithm",
}

// rebootReason says why the node needs a reboot: the v1alpha1 fields that change and Talos does
// not apply live.
func rebootReason(version string, changes []redact.Change) string {
	var fields []string

	for _, c := range changes {
		if c.Document != "v1alpha1" {
			continue
		}

		for _, path := range c.Paths() {
			if !slices.ContainsFunc(liveFields, func(live string) bool { return path == live || strings.HasPrefix(path, live+".") }) {
				fields = append(fields, path)
			}
		}
	}

	if len(fields) == 0 {
		return "the node answers that it needs one"
	}

	return fmt.Sprintf("Talos %s applies a change of %s only with a reboot", version, strings.Join(fields, ", "))
}

// installImageChanges is the declared installer image when it differs from the running one.
func installImageChanges(running, declared string) string {
	image := func(s string) string {
		cfg, err := configloader.NewFromBytes([]byte(s))
		if err != nil || cfg.Machine() == nil {
			return ""
		}

		return cfg.Machine().Install().Image()
	}

	if was, now := image(running), image(declared); was != now && now != "" {
		return now
	}

	return ""
}

// describePlan logs one line for a node whose declared configuration changes: the documents and
// fields that change (against what the node runs, else the recorded configuration) and whether
// Talos applies them live or reboots, and why. The node is asked (a dry run) how it applies it.
func describePlan(ctx context.Context, o day2.ConfigOptions, recorded string) { //nolint:contextcheck // the dry run's own timeout
	log := p.GetLogger(ctx)

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	if !ConfigDiffs() {
		describeDryRun(ctx, o)
		return
	}

	plan, err := day2.PlanConfig(ctx, o, true)
	if err != nil {
		_, summary, _ := redactedDiff(recorded, o.Config, "recorded", "declared")
		log.Warningf("%s: configuration changes: %s; the node could not be asked how it applies them (%v)", o.Node.Name, summary, err)

		return
	}

	// Against what the node runs: that is what changes on it (the recorded configuration, with
	// the Kubernetes upgrade's patches of an `up` in progress, or drift, is not).
	_, summary, changes := redactedDiff(plan.Running, o.Config, "running", "declared")
	upgrade := installImageChanges(plan.Running, o.Config)

	switch {
	case plan.Unchanged:
		log.Infof("%s: already runs this configuration (upgrades earlier in the same up make it so)", o.Node.Name)
	case upgrade != "":
		log.Warningf("%s: configuration changes: %s; reboots: the installer image changes to %s, so the node is upgraded (and rebooted) to it before this configuration applies", o.Node.Name, summary, upgrade)
	case plan.Reboot:
		log.Warningf("%s: configuration changes: %s; reboots: %s", o.Node.Name, summary, rebootReason(plan.Version, changes))
	default:
		log.Infof("%s: configuration changes: %s; applies live", o.Node.Name, summary)
	}
}

// Read is `pulumi refresh`: the state takes the configuration the node runs, so drift shows as
// a change of the redacted configuration, and the next `up` applies the declared one again. A node
// that cannot be read keeps its state (the refresh says why).
func (r *NodeConfig) Read(ctx context.Context, req infer.ReadRequest[NodeConfigArgs, NodeConfigState]) (infer.ReadResponse[NodeConfigArgs, NodeConfigState], error) {
	out := infer.ReadResponse[NodeConfigArgs, NodeConfigState](req)

	o, err := req.State.options(ctx)
	if err != nil || o.Access.Talosconfig == "" {
		return out, nil //nolint:nilerr // nothing to read the node with: the state stays
	}

	running, err := readRunning(ctx, o)
	if err != nil {
		p.GetLogger(ctx).Warningf("%s: could not read the configuration the node runs; its state is kept (%v)", o.Node.Name, err)
		return out, nil
	}

	if day2.SameConfig(running, req.State.Configuration) {
		return out, nil
	}

	redacted, err := redact.Config(running)
	if err != nil {
		return out, fmt.Errorf("%s runs a configuration that cannot be read: %w", o.Node.Name, err)
	}

	out.State.Configuration, out.State.RedactedConfiguration = running, redacted

	return out, nil
}

// ConfigDiffEnv turns the previews' configuration diffs off when "off": no running configuration
// is read, so no drift is seen, and a changed node is only asked how it applies the change. It is
// how the preview was before the diffs (the benchmark's baseline), and a way out for a preview
// that must not read every node.
const ConfigDiffEnv = "TALOS_PROXMOX_CONFIG_DIFF"

// ConfigDiffs reports whether previews show configuration diffs and drift (ConfigDiffEnv).
func ConfigDiffs() bool { return os.Getenv(ConfigDiffEnv) != "off" }

// describeDryRun is the line a changed node gets with the diffs off: the node's answer only.
func describeDryRun(ctx context.Context, o day2.ConfigOptions) {
	plan, err := day2.PlanConfig(ctx, o, false)

	switch log := p.GetLogger(ctx); {
	case err != nil:
		log.Warningf("%s: the configuration changes; the node could not be asked how it applies it (%v)", o.Node.Name, err)
	case plan.Reboot:
		log.Warningf("%s: the configuration changes; reboots", o.Node.Name)
	default:
		log.Infof("%s: the configuration changes; applies live", o.Node.Name)
	}
}

// Update applies the configuration. Diff asks for an update only when the node should run
// another configuration than it does: a declared change, or drift with the same declaration,
// which is applied again too.
func (r *NodeConfig) Update(ctx context.Context, req infer.UpdateRequest[NodeConfigArgs, NodeConfigState]) (infer.UpdateResponse[NodeConfigState], error) {
	return updated(ctx, req, applyConfig)
}

// applyConfig applies the configuration in to its node.
func applyConfig(ctx context.Context, in NodeConfigArgs) error {
	o, err := in.options(ctx)
	if err != nil {
		return err
	}

	start := time.Now()

	rebooted, err := day2.ApplyConfig(ctx, o)
	if err != nil {
		return err
	}

	how := "live, without a reboot"
	if rebooted {
		how = "with a reboot"
	}

	p.GetLogger(ctx).Infof("%s: configuration applied %s (%s)", o.Node.Name, how, time.Since(start).Round(time.Millisecond))

	return nil
}

// NodeConfigKind registers NodeConfigs.
var NodeConfigKind = kindOf[NodeConfig, NodeConfigArgs, Registered]()
