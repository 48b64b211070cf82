package day2

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"filippo.io/age"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/etcdbackup"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
)

// SnapshotOptions say where an etcd snapshot comes from and where it goes.
type SnapshotOptions struct {
	Access Access
	// ControlPlanes are asked in order; the first whose etcd member streams a snapshot gives it.
	ControlPlanes []Node
	Cluster       string
	Destination   string
	AgeRecipients []string
	Keep          int
	Timeout       time.Duration
	Progress      Progress
}

// Snapshot takes an etcd snapshot through the Talos API (MachineService.EtcdSnapshot, what
// `talosctl etcd snapshot` calls) from the first control plane that gives one, verifies it with
// etcd's own snapshot status, stores it (encrypted to the age recipients, if any) and prunes the
// cluster's older ones (etcdbackup.Take). A control plane that does not answer, or whose
// snapshot fails verification, hands over to the next; the error names every one's failure.
func Snapshot(ctx context.Context, o SnapshotOptions) (etcdbackup.Info, error) {
	if len(o.ControlPlanes) == 0 {
		return etcdbackup.Info{}, errors.New("no control plane runs etcd yet: there is nothing to snapshot")
	}

	dst, err := etcdbackup.ParseDestination(o.Destination)
	if err != nil {
		return etcdbackup.Info{}, err
	}

	recipients, err := etcdbackup.ParseRecipients(o.AgeRecipients)
	if err != nil {
		return etcdbackup.Info{}, err
	}

	var info etcdbackup.Info

	err = poll(ctx, o.Timeout, "an etcd snapshot", o.Progress, func(ctx context.Context) error {
		var errs []error

		for _, n := range o.ControlPlanes {
			i, err := snapshotFrom(ctx, o, n, dst, recipients)
			if err == nil {
				info = i
				return nil
			}

			errs = append(errs, fmt.Errorf("%s (%s): %w", n.Name, n.Address, err))
		}

		return errors.Join(errs...)
	})

	return info, err
}

func snapshotFrom(ctx context.Context, o SnapshotOptions, n Node, dst etcdbackup.Destination, recipients []age.Recipient) (etcdbackup.Info, error) {
	c, err := o.Access.Talos(ctx, n.Address)
	if err != nil {
		return etcdbackup.Info{}, err
	}
	defer c.Close() //nolint:errcheck

	o.Progress.say("taking an etcd snapshot from %s", n.Name)

	info, err := etcdbackup.Take(client.WithNode(ctx, n.Address), etcdbackup.FromTalos(c), dst, etcdbackup.TakeOptions{
		ClusterName: o.Cluster, Recipients: recipients, Keep: o.Keep,
		Progress: func(bytes int64) { o.Progress.say("etcd snapshot from %s: %d MiB streamed", n.Name, bytes>>20) },
	})
	if err != nil && info.Location != "" {
		// Stored, but older snapshots were not pruned: the snapshot counts; the next one prunes.
		o.Progress.say("etcd snapshot stored at %s; pruning older ones failed: %v", info.Location, err)

		return info, nil
	}

	return info, err
}

// BootstrapOptions say how a cluster's etcd starts.
type BootstrapOptions struct {
	Access Access
	// Node bootstraps etcd; ControlPlanes are every control plane (Node among them).
	Node          Node
	ControlPlanes []Node
	// RecoverFrom is the URL of a snapshot to restore ("" for an empty etcd), AgeIdentity what
	// decrypts it.
	RecoverFrom string
	AgeIdentity string
	Timeout     time.Duration
	Progress    Progress
}

// BootstrapResult says what Bootstrap did.
type BootstrapResult struct {
	// Joined: etcd already ran (on this node or another control plane), nothing was done.
	Joined bool
	// Recovered is the snapshot restored, when one was.
	Recovered *etcdbackup.Info
}

// Bootstrap starts the cluster's etcd on o.Node, once: when a control plane already runs an etcd
// member (a running cluster, or one whose other control planes survive the replacement of this
// node's VM) it does nothing, as the node joins that etcd by itself. Otherwise it bootstraps, from
// o.RecoverFrom when given: the snapshot is downloaded and verified first (a missing, corrupt or
// undecryptable one fails before the node is touched), uploaded (EtcdRecover) and etcd bootstrapped
// from it (Bootstrap{RecoverEtcd}), which is Talos' disaster recovery (`talosctl bootstrap
// --recover-from`). Talos' AlreadyExists (the node has etcd data) means it was bootstrapped; either
// way it then waits for the node's etcd to run, and reports a restore Talos refused.
func Bootstrap(ctx context.Context, o BootstrapOptions) (BootstrapResult, error) {
	var snapshot string

	var (
		result  BootstrapResult
		already bool
	)

	if o.RecoverFrom != "" {
		path, info, cleanup, err := etcdbackup.Fetch(ctx, o.RecoverFrom, o.AgeIdentity)
		if err != nil {
			return result, fmt.Errorf("the snapshot to recover from: %w", err)
		}
		defer cleanup()

		snapshot, result.Recovered = path, &info
	}

	err := poll(ctx, o.Timeout, "the bootstrap of etcd on "+o.Node.Name, o.Progress, func(ctx context.Context) error {
		if etcdRuns(ctx, o.Access, o.ControlPlanes) {
			result = BootstrapResult{Joined: true}
			return nil
		}

		c, err := o.Access.Talos(ctx, o.Node.Address)
		if err != nil {
			return err
		}
		defer c.Close() //nolint:errcheck

		ctx = client.WithNode(ctx, o.Node.Address)
		req := &machineapi.BootstrapRequest{}

		if snapshot != "" {
			if err := upload(ctx, c, snapshot); err != nil {
				return err
			}

			o.Progress.say("etcd snapshot (revision %d) uploaded to %s; bootstrapping etcd from it", result.Recovered.Revision, o.Node.Name)
			req.RecoverEtcd = true
		}

		err = c.Bootstrap(ctx, req)

		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.AlreadyExists:
			// The node holds etcd data: bootstrapped before (or a restore that failed, which the
			// wait below reports).
			result.Recovered, already = nil, true

			return nil
		case codes.InvalidArgument, codes.FailedPrecondition:
			return retry.Permanent(err)
		default:
			return err
		}
	})

	if err != nil || result.Joined {
		return result, err
	}

	// Talos answers a bootstrap at once and starts etcd (restoring first) afterwards: a restore
	// that fails (a snapshot Talos' own check refuses) shows only in the etcd service, which then
	// fails, and the node keeps what the restore left (AlreadyExists from then on).
	err = poll(ctx, o.Timeout, "etcd restored on "+o.Node.Name, o.Progress, func(ctx context.Context) error {
		if memberHealthy(ctx, o.Access, o.Node.Address) {
			return nil
		}

		if msg, failed := etcdServiceFailed(ctx, o.Access, o.Node.Address); failed {
			if already {
				return retry.Permanent(fmt.Errorf("the node holds etcd data but its etcd service failed: %s; "+
					"reset the node's EPHEMERAL partition (talosctl reset --system-labels-to-wipe EPHEMERAL) and run `pulumi up` again", msg))
			}

			return retry.Permanent(fmt.Errorf("Talos could not start etcd from the snapshot: %s", msg))
		}

		return errors.New("etcd does not run yet")
	})

	return result, err
}

// etcdServiceFailed reports whether the node's etcd service failed, with its last message.
func etcdServiceFailed(ctx context.Context, a Access, address string) (string, bool) {
	c, err := a.Talos(ctx, address)
	if err != nil {
		return "", false
	}
	defer c.Close() //nolint:errcheck

	resp, err := c.ServiceList(client.WithNode(ctx, address))
	if err != nil {
		return "", false
	}

	for _, m := range resp.GetMessages() {
		for _, svc := range m.GetServices() {
			if svc.GetId() != "etcd" || svc.GetState() != "Failed" {
				continue
			}

			events := svc.GetEvents().GetEvents()
			if len(events) == 0 {
				return "the etcd service failed", true
			}

			return events[len(events)-1].GetMsg(), true
		}
	}

	return "", false
}

func upload(ctx context.Context, c *client.Client, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return retry.Permanent(err)
	}
	defer f.Close() //nolint:errcheck

	_, err = c.EtcdRecover(ctx, f)

	return err
}

// etcdRuns reports whether a control plane answers for a running etcd member.
func etcdRuns(ctx context.Context, a Access, cps []Node) bool {
	for _, n := range cps {
		if memberHealthy(ctx, a, n.Address) {
			return true
		}
	}

	return false
}
