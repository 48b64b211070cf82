package day2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"k8s.io/client-go/kubernetes"
)

// UpgradeOptions describe one node's Talos OS upgrade.
type UpgradeOptions struct {
	Access Access
	Node   Node
	// ControlPlanes are all control planes, for the etcd gates.
	ControlPlanes []Node
	// Image is the installer image to upgrade to; Target is what the node must run afterwards.
	Image  string
	Target Installed
	// Drain cordons and drains the node before its reboot (uncordoned after the post-gate).
	Drain        bool
	DrainTimeout time.Duration
	// CheckReady requires the Kubernetes Node to be Ready before and after (false when the
	// cluster has no CNI: no node is ever Ready).
	CheckReady bool
	// Timeout bounds each wait: a gate, the pull and install, the reboot.
	Timeout  time.Duration
	Progress Progress
}

// lifecycleAPI is the first Talos version with ImageService and LifecycleService (talosctl
// v1.13.9 uses them from ">1.13.0-alpha.2"); older nodes only have MachineService.Upgrade.
var lifecycleAPI = semver.MustParse("1.13.0-alpha.3")

// HasLifecycleAPI reports whether a node running version v is upgraded through LifecycleService.
func HasLifecycleAPI(v string) bool {
	sv, err := semver.ParseTolerant(v)

	return err == nil && sv.GTE(lifecycleAPI)
}

// Upgrade brings one node to o.Target: pre-gate (etcd healthy with every member, Node Ready),
// leadership handed over if the node leads etcd, install of the new image, cordon and drain,
// reboot, wait for a new boot id, post-gate (version and schematic, etcd member, Node Ready,
// static pods), uncordon. A node that already runs o.Target (an upgrade an interrupted run
// finished) only goes through the post-gate. It returns what the node runs afterwards.
func Upgrade(ctx context.Context, o UpgradeOptions) (Observed, error) {
	c, err := o.Access.Talos(ctx, o.Node.Address)
	if err != nil {
		return Observed{}, err
	}
	defer c.Close() //nolint:errcheck

	var kube kubernetes.Interface
	if kube, err = o.Access.Kube(); err != nil {
		return Observed{}, err
	}

	before, err := WaitObserve(ctx, c, o.Node.Name, o.Timeout, o.Progress)
	if err != nil {
		return Observed{}, err
	}

	if before.Installed == o.Target {
		o.Progress.say("%s already runs %s: checking it", o.Node.Name, o.Target)

		return before, o.postGate(ctx, kube, before)
	}

	o.Progress.say("upgrading %s: %s → %s", o.Node.Name, before.Installed, o.Target)

	if err := o.preGate(ctx, kube, c); err != nil {
		return before, err
	}

	if HasLifecycleAPI(before.Version) {
		err = o.installAndReboot(ctx, c, kube)
	} else {
		err = o.legacyUpgrade(ctx, c, kube)
	}

	if err != nil {
		return before, fmt.Errorf("upgrading node %s: %w", o.Node.Name, err)
	}

	after, err := o.waitReboot(ctx, before.BootID)
	if err != nil {
		return before, err
	}

	if after.Installed != o.Target {
		uerr := o.uncordon(ctx, kube)

		return after, errors.Join(fmt.Errorf("node %s rebooted but runs %s, not %s: the new image did not boot and Talos "+
			"fell back to the previous one; see the node's console or `talosctl dmesg`, fix the cause and run `pulumi up` again",
			o.Node.Name, after.Installed, o.Target), uerr)
	}

	return after, o.postGate(ctx, kube, after)
}

// preGate waits until etcd is healthy with all members and the node is Ready, then hands etcd
// leadership over if the node leads.
func (o UpgradeOptions) preGate(ctx context.Context, kube kubernetes.Interface, c *client.Client) error {
	var view EtcdView

	if err := poll(ctx, o.Timeout, "the pre-upgrade gate of "+o.Node.Name, o.Progress, func(ctx context.Context) (err error) {
		if view, err = EtcdHealthy(ctx, o.Access, o.ControlPlanes); err != nil {
			return err
		}

		if o.CheckReady {
			_, err = NodeReady(ctx, kube, o.Node.Name)
		}

		return err
	}); err != nil {
		return err
	}

	if o.Node.ControlPlane && view.Leader == o.Node.Name && len(o.ControlPlanes) > 1 {
		o.Progress.say("%s leads etcd: handing leadership over before its reboot", o.Node.Name)

		if _, err := c.EtcdForfeitLeadership(ctx, &machineapi.EtcdForfeitLeadershipRequest{}); err != nil {
			return fmt.Errorf("handing etcd leadership of %s over: %w", o.Node.Name, err)
		}
	}

	return nil
}

// legacyUpgrade is MachineService.Upgrade (Talos before v1.13): the node validates etcd itself,
// installs and reboots at once, so the drain comes first.
func (o UpgradeOptions) legacyUpgrade(ctx context.Context, c *client.Client, kube kubernetes.Interface) error {
	if err := o.drain(ctx, kube); err != nil {
		return err
	}

	o.Progress.say("%s: installing %s and rebooting (MachineService.Upgrade)", o.Node.Name, o.Image)

	// Deprecated in machinery v1.13 in favour of LifecycleService, which older nodes do not serve.
	_, err := c.UpgradeWithOptions(ctx, client.WithUpgradeImage(o.Image)) //nolint:staticcheck // the only API before v1.13

	return err
}

// installAndReboot is the Talos v1.13+ flow talosctl uses: ImageService.Pull and
// LifecycleService.Upgrade while the node keeps working, then the drain, then the reboot.
func (o UpgradeOptions) installAndReboot(ctx context.Context, c *client.Client, kube kubernetes.Interface) error {
	system := &common.ContainerdInstance{Driver: common.ContainerDriver_CRI, Namespace: common.ContainerdNamespace_NS_SYSTEM}
	ictx, cancel := context.WithTimeout(ctx, o.Timeout)

	defer cancel()

	o.Progress.say("%s: pulling %s", o.Node.Name, o.Image)

	pull, err := c.ImageClient.Pull(ictx, &machineapi.ImageServicePullRequest{Containerd: system, ImageRef: o.Image})
	if err != nil {
		return fmt.Errorf("pulling %s: %w", o.Image, err)
	}

	for {
		if _, err := pull.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("pulling %s: %w", o.Image, err)
		}
	}

	o.Progress.say("%s: installing %s (LifecycleService.Upgrade)", o.Node.Name, o.Image)

	up, err := c.LifecycleClient.Upgrade(ictx, &machineapi.LifecycleServiceUpgradeRequest{
		Containerd: system, Source: &machineapi.InstallArtifactsSource{ImageName: o.Image},
	})
	if err != nil {
		return fmt.Errorf("installing %s: %w", o.Image, err)
	}

	var messages []string

	for {
		resp, err := up.Recv()
		if err != nil {
			return fmt.Errorf("installing %s: the stream ended without an exit code: %w", o.Image, err)
		}

		if m := resp.GetProgress().GetMessage(); m != "" {
			messages = append(messages, m)
		}

		if ec, ok := resp.GetProgress().GetResponse().(*machineapi.LifecycleServiceInstallProgress_ExitCode); ok {
			if ec.ExitCode != 0 {
				return fmt.Errorf("installing %s: the installer exited with code %d: %s", o.Image, ec.ExitCode, strings.Join(messages, "; "))
			}

			break
		}
	}

	if err := o.drain(ctx, kube); err != nil {
		return err
	}

	o.Progress.say("%s: rebooting into %s", o.Node.Name, o.Target.Version)

	return c.Reboot(ctx)
}

// waitReboot waits for a new boot id and reads what the node runs then. Every try dials anew:
// a client that failed to connect while the node was down would wait out gRPC's reconnect
// backoff (up to seconds) after the node is back.
func (o UpgradeOptions) waitReboot(ctx context.Context, bootID string) (Observed, error) {
	var after Observed

	err := pollEvery(ctx, 100*time.Millisecond, o.Timeout, o.Node.Name+" to reboot", o.Progress, func(ctx context.Context) error {
		c, err := o.Access.Talos(ctx, o.Node.Address)
		if err != nil {
			return err
		}
		defer c.Close() //nolint:errcheck

		obs, err := Observe(ctx, c)
		if err != nil {
			return err
		}

		if obs.BootID == bootID {
			return fmt.Errorf("%s has not rebooted yet", o.Node.Name)
		}

		after = obs

		return nil
	})

	return after, err
}

// postGate waits until the node's etcd member is healthy, its Node Ready and (on a control
// plane) its static pods run, then uncordons it.
func (o UpgradeOptions) postGate(ctx context.Context, kube kubernetes.Interface, obs Observed) error {
	err := poll(ctx, o.Timeout, "the post-upgrade gate of "+o.Node.Name, o.Progress, func(ctx context.Context) error {
		if o.Node.ControlPlane {
			if _, err := EtcdHealthy(ctx, o.Access, o.ControlPlanes); err != nil {
				return err
			}
		}

		if o.CheckReady {
			node, err := NodeReady(ctx, kube, o.Node.Name)
			if err != nil {
				return err
			}

			// A Ready condition from before the reboot proves nothing: the kubelet reports the
			// boot it runs in.
			if got := node.Status.NodeInfo.BootID; got != obs.BootID {
				return fmt.Errorf("the kubelet of %s has not reported since the reboot (its Node shows boot %.8s, the node runs %.8s)",
					o.Node.Name, got, obs.BootID)
			}
		}

		if o.Node.ControlPlane && o.CheckReady {
			return StaticPodsRunning(ctx, kube, o.Node.Name)
		}

		return nil
	})
	if err != nil {
		return fmt.Errorf("node %s runs %s but is not healthy: %w", o.Node.Name, obs.Installed, err)
	}

	return o.uncordon(ctx, kube)
}

func (o UpgradeOptions) drain(ctx context.Context, kube kubernetes.Interface) error {
	if !o.Drain {
		return nil
	}

	o.Progress.say("%s: cordoning and draining (timeout %s)", o.Node.Name, o.DrainTimeout)

	err := Drain(ctx, kube, o.Node.Name, o.DrainTimeout, o.Progress)
	if err != nil {
		// The node was not rebooted: give it its workloads back rather than leave it cordoned.
		err = errors.Join(err, o.uncordon(ctx, kube))
	}

	return err
}

func (o UpgradeOptions) uncordon(ctx context.Context, kube kubernetes.Interface) error {
	if !o.Drain {
		return nil
	}

	return Cordon(ctx, kube, o.Node.Name, false)
}
