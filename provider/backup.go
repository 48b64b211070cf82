package provider

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/etcdbackup"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/proxmox"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/wire"
)

// checkRecovery reads recovery.fromSnapshot when this `up` will restore it: no control plane of
// the cluster has its VM (all lost, or a new cluster restored from another's snapshot), or the
// `up` replaces every one. At `up` the snapshot is downloaded, decrypted and verified as the
// bootstrap will (etcd's own checks): a missing, undecryptable, truncated or corrupt snapshot
// fails here, before any VM is created or deleted. A preview only looks for the object.
func checkRecovery(ctx *pulumi.Context, c *spec.Cluster, inv *proxmox.Inventory, loss spec.DataLoss) error {
	r := c.Recovery
	if r == nil || r.FromSnapshot == "" || inv == nil || !restores(c, inv, loss) {
		return nil
	}

	if ctx.DryRun() {
		ok, err := etcdbackup.Exists(ctx.Context(), r.FromSnapshot)

		switch {
		case err != nil:
			return fmt.Errorf("recovery.fromSnapshot: %w", err)
		case !ok:
			return fmt.Errorf("recovery.fromSnapshot: there is no object at %s; give the location of a snapshot "+
				"(lastEtcdSnapshot.location of this stack, or one talos-backup wrote)", r.FromSnapshot)
		}

		return nil
	}

	_ = ctx.Log.Info("recovery: reading and verifying the snapshot "+r.FromSnapshot+" before anything is touched", nil)

	_, info, cleanup, err := etcdbackup.Fetch(ctx.Context(), r.FromSnapshot, r.AgeIdentity)
	if err != nil {
		if errors.Is(err, etcdbackup.ErrNotFound) {
			return fmt.Errorf("recovery.fromSnapshot: %w; give the location of a snapshot", err)
		}

		return fmt.Errorf("recovery.fromSnapshot: %w; nothing was touched", err)
	}

	cleanup()

	_ = ctx.Log.Info(fmt.Sprintf("recovery: the snapshot holds etcd revision %d (%d keys, %d bytes); etcd is bootstrapped from it",
		info.Revision, info.TotalKeys, info.Size), nil)

	return nil
}

// restores tells whether the bootstrap of this `up` starts etcd again: no control plane keeps a
// VM of the running cluster.
func restores(c *spec.Cluster, inv *proxmox.Inventory, loss spec.DataLoss) bool {
	if len(loss.Replaced)+len(loss.Removed) > 0 {
		return true
	}

	for _, n := range c.ControlPlanes() {
		if inv.HasVM(c.Name, n.Name) {
			return false
		}
	}

	return true
}

// backupManifestName names the inline manifest of scheduled backups.
const backupManifestName = "talos-proxmox-etcd-backup" // in spec.ReservedManifestNames

// backupManifest is the inline manifest of scheduled backups (etcdBackup.schedule): siderolabs'
// talos-backup as a CronJob with its Talos ServiceAccount (the control planes grant the access,
// see talosconfig), to the same destination as the component's own snapshots.
func backupManifest(c *spec.Cluster) (talosconfig.Manifest, bool, error) {
	b := c.EtcdBackup
	if b == nil || b.Schedule == "" {
		return talosconfig.Manifest{}, false, nil
	}

	dst, err := etcdbackup.ParseDestination(b.Destination)
	if err != nil {
		return talosconfig.Manifest{}, false, fmt.Errorf("etcdBackup.destination: %w", err)
	}

	contents, err := etcdbackup.CronJobManifests(etcdbackup.CronJobOptions{
		ClusterName: c.Name, Destination: dst, Schedule: b.Schedule, Recipients: b.AgeRecipients, CredentialsSecret: b.ScheduleSecret,
	})
	if err != nil {
		return talosconfig.Manifest{}, false, fmt.Errorf("etcdBackup.schedule: %w", err)
	}

	return talosconfig.Manifest{Name: backupManifestName, Contents: contents}, true, nil
}

// lastSnapshot is the lastEtcdSnapshot output: the snapshot resource's last one (empty without
// etcdBackup, or before the first snapshot).
func lastSnapshot(b *wire.Backup) EtcdSnapshotInfoOutput {
	if b == nil || b.Snapshot == nil {
		return pulumi.ToOutput(EtcdSnapshotInfo{}).(EtcdSnapshotInfoOutput)
	}

	s := b.Snapshot

	return pulumi.All(s.Location, s.Revision, s.Size, s.Sha256, s.TakenAt).ApplyT(func(v []any) EtcdSnapshotInfo {
		return EtcdSnapshotInfo{
			Location: v[0].(string), Revision: v[1].(int), Size: v[2].(int), Sha256: v[3].(string), TakenAt: v[4].(string),
		}
	}).(EtcdSnapshotInfoOutput)
}
