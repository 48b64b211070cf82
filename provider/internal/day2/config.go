package day2

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
)

// ConfigOptions describe a new machine configuration for one running node.
type ConfigOptions struct {
	Access Access
	Node   Node
	// ControlPlanes are all control planes, for the etcd gate after a reboot.
	ControlPlanes []Node
	Config        string
	// CheckReady requires the Node to be Ready after a reboot (false without a CNI).
	CheckReady bool
	Timeout    time.Duration
	Progress   Progress
}

// ConfigPlan is what Talos says applying a configuration would do (a dry run).
type ConfigPlan struct {
	// Reboot is true when Talos applies it only with a reboot.
	Reboot bool
	// Unchanged is true when the node already runs it.
	Unchanged bool
	// Details is Talos' summary (mode and diff).
	Details string
	// Running is the configuration the node runs (machinery's encoding, without comments):
	// what the change is made against, whatever the stack recorded.
	Running string
	// Version is the Talos version the node runs.
	Version string
}

// RunningConfig reads the configuration node n runs, as `talosctl get machineconfig` shows it
// (the active MachineConfig resource), in machinery's encoding without comments.
func RunningConfig(ctx context.Context, a Access, n Node) (string, error) {
	c, err := a.Talos(ctx, n.Address)
	if err != nil {
		return "", err
	}
	defer c.Close() //nolint:errcheck

	return runningConfig(ctx, c, n)
}

func runningConfig(ctx context.Context, c *client.Client, n Node) (string, error) {
	mc, err := safe.StateGetByID[*config.MachineConfig](client.WithNode(ctx, n.Address), c.COSI, config.ActiveID)
	if err != nil {
		return "", fmt.Errorf("reading the configuration %s runs: %w", n.Name, err)
	}

	return mc.Provider().EncodeString(encoder.WithComments(encoder.CommentsDisabled))
}

// PlanConfig asks the node, without changing anything, how it would apply o.Config (AUTO mode).
// With running, it also reads the configuration and the Talos version the node runs (Running,
// Version); without, it only asks (Details, Reboot, Unchanged).
func PlanConfig(ctx context.Context, o ConfigOptions, running bool) (ConfigPlan, error) {
	c, err := o.Access.Talos(ctx, o.Node.Address)
	if err != nil {
		return ConfigPlan{}, err
	}
	defer c.Close() //nolint:errcheck

	var plan ConfigPlan

	if running {
		if plan.Running, err = runningConfig(ctx, c, o.Node); err != nil {
			return ConfigPlan{}, err
		}

		version, err := c.Version(ctx)
		if err != nil {
			return ConfigPlan{}, fmt.Errorf("reading the Talos version of %s: %w", o.Node.Name, err)
		}

		for _, m := range version.GetMessages() {
			plan.Version = m.GetVersion().GetTag()
		}
	}

	resp, err := c.ApplyConfiguration(ctx, &machineapi.ApplyConfigurationRequest{
		Data: []byte(o.Config), Mode: machineapi.ApplyConfigurationRequest_AUTO, DryRun: true,
	})
	if err != nil {
		return ConfigPlan{}, fmt.Errorf("node %s refuses the new configuration: %w", o.Node.Name, err)
	}

	asked := planOf(resp)
	plan.Reboot, plan.Unchanged, plan.Details = asked.Reboot, asked.Unchanged, asked.Details

	return plan, nil
}

func planOf(resp *machineapi.ApplyConfigurationResponse) ConfigPlan {
	var plan ConfigPlan

	for _, m := range resp.GetMessages() {
		//nolint:staticcheck // nodes before Talos v1.14 still answer REBOOT for a change that needs one
		plan.Reboot = plan.Reboot || m.GetMode() == machineapi.ApplyConfigurationRequest_REBOOT
		plan.Details = strings.TrimSpace(plan.Details + "\n" + m.GetModeDetails())
	}

	plan.Unchanged = strings.Contains(plan.Details, "No changes")

	return plan
}

// ApplyConfig applies o.Config to the running node in AUTO mode: Talos applies what it can live
// and reboots for the rest. After a reboot it waits for the new boot, etcd with every member (on
// a control plane) and the Node Ready. It says whether the node rebooted.
func ApplyConfig(ctx context.Context, o ConfigOptions) (bool, error) {
	c, err := o.Access.Talos(ctx, o.Node.Address)
	if err != nil {
		return false, err
	}
	defer c.Close() //nolint:errcheck

	before, err := WaitObserve(ctx, c, o.Node.Name, o.Timeout, o.Progress)
	if err != nil {
		return false, err
	}

	resp, err := c.ApplyConfiguration(ctx, &machineapi.ApplyConfigurationRequest{
		Data: []byte(o.Config), Mode: machineapi.ApplyConfigurationRequest_AUTO,
	})
	if err != nil {
		return false, fmt.Errorf("applying the configuration of node %s: %w", o.Node.Name, err)
	}

	reboot := planOf(resp).Reboot
	if reboot {
		o.Progress.say("%s: the new configuration needs a reboot", o.Node.Name)

		if err := o.afterReboot(ctx, before); err != nil {
			return true, err
		}
	}

	return reboot, o.SyncWorker(ctx)
}

// SyncWorker sets a worker's labels and taints on its Node (SyncWorkerNode): Talos cannot change
// a worker's taints itself. Also for an adopted worker that runs its declared configuration
// already (nothing is applied): its taints may never have reached its Node.
func (o ConfigOptions) SyncWorker(ctx context.Context) error {
	if o.Node.ControlPlane {
		return nil
	}

	kube, err := o.Access.Kube()
	if err != nil {
		return err
	}

	return SyncWorkerNode(ctx, kube, o.Node.Name, o.Config, o.Timeout, o.Progress)
}

func (o ConfigOptions) afterReboot(ctx context.Context, before Observed) error {
	u := UpgradeOptions{Access: o.Access, Node: o.Node, ControlPlanes: o.ControlPlanes, CheckReady: o.CheckReady, Timeout: o.Timeout, Progress: o.Progress}

	after, err := u.waitReboot(ctx, before.BootID)
	if err != nil {
		return err
	}

	kube, err := o.Access.Kube()
	if err != nil {
		return err
	}

	return u.postGate(ctx, kube, after)
}

// SameConfig reports whether two machine configurations say the same, read and written back by
// Talos' machinery: a configuration generated by another machinery release (the talos provider's,
// before the component generated them itself) with other field order or quoting is no change.
func SameConfig(a, b string) bool {
	if a == b {
		return true
	}

	canonical := func(s string) (string, bool) {
		cfg, err := configloader.NewFromBytes([]byte(s))
		if err != nil {
			return "", false
		}

		out, err := cfg.EncodeString(encoder.WithComments(encoder.CommentsDisabled))

		return out, err == nil
	}

	ca, okA := canonical(a)
	cb, okB := canonical(b)

	return okA && okB && ca == cb
}
