package spec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/etcdbackup"
)

// EtcdBackupInput configures etcd snapshots.
type EtcdBackupInput struct {
	Destination    string
	Keep           *int
	AgeRecipients  []string
	Required       *bool
	SnapshotNow    string
	Schedule       string
	ScheduleSecret string
}

// RecoveryInput configures the restore of etcd from a snapshot. AgeIdentity may be a secret that
// is not known yet (then it is checked when it is).
type RecoveryInput struct {
	FromSnapshot string
	AgeIdentity  Patch
}

// EtcdBackup is the validated etcd backup policy.
type EtcdBackup struct {
	// Destination is the URL snapshots go to (etcdbackup.ParseDestination accepted it).
	Destination   string
	Keep          int
	AgeRecipients []string
	Required      bool
	SnapshotNow   string
	// Schedule is the cron schedule of the in-cluster talos-backup CronJob ("" for none), and
	// ScheduleSecret the Secret with its S3 keys.
	Schedule       string
	ScheduleSecret string
}

// Recovery is the validated restore policy: FromSnapshot "" restores from the snapshot the `up`
// takes first (with EtcdBackup).
type Recovery struct {
	FromSnapshot string
	// AgeIdentity decrypts the snapshot (a secret: checked with it before any VM is touched, and
	// never in an output or a message).
	AgeIdentity string
}

// DefaultEtcdBackupKeep is how many snapshots a cluster keeps by default.
const DefaultEtcdBackupKeep = 10

// DefaultScheduleSecret is the Secret the talos-backup CronJob reads its S3 keys from.
const DefaultScheduleSecret = "talos-backup-s3"

func buildBackup(p *problems, in Input, c *Cluster) {
	c.AllowDataLoss = in.AllowDataLoss

	if b := in.EtcdBackup; b != nil {
		c.EtcdBackup = buildEtcdBackup(p, *b)
	}

	if r := in.Recovery; r != nil {
		c.Recovery = &Recovery{FromSnapshot: r.FromSnapshot, AgeIdentity: r.AgeIdentity.Text}

		if r.FromSnapshot != "" {
			if err := etcdbackup.CheckObjectURL(r.FromSnapshot); err != nil {
				p.errorf("recovery.fromSnapshot", "%v", err)
			}
		}

		if r.AgeIdentity.Known && r.AgeIdentity.Text != "" {
			if _, err := etcdbackup.ParseIdentity(r.AgeIdentity.Text); err != nil {
				p.errorf("recovery.ageIdentity", "%v", err)
			}
		}

		if r.FromSnapshot == "" && c.EtcdBackup == nil {
			p.errorf("recovery.fromSnapshot", "is required without etcdBackup (there is no snapshot of this `up` to "+
				"restore); give the URL of a snapshot, e.g. the lastEtcdSnapshot.location output")
		}
	}
}

func buildEtcdBackup(p *problems, in EtcdBackupInput) *EtcdBackup {
	b := &EtcdBackup{
		Destination:    in.Destination,
		Keep:           DefaultEtcdBackupKeep,
		AgeRecipients:  slices.Clone(in.AgeRecipients),
		Required:       in.Required == nil || *in.Required,
		SnapshotNow:    in.SnapshotNow,
		Schedule:       strings.TrimSpace(in.Schedule),
		ScheduleSecret: in.ScheduleSecret,
	}

	dst, err := etcdbackup.ParseDestination(in.Destination)
	if err != nil {
		p.errorf("etcdBackup.destination", "%v", err)
	}

	if in.Keep != nil {
		if *in.Keep < 1 {
			p.errorf("etcdBackup.keep", "is %d; keep at least 1 snapshot (default %d)", *in.Keep, DefaultEtcdBackupKeep)
		} else {
			b.Keep = *in.Keep
		}
	}

	if _, err := etcdbackup.ParseRecipients(in.AgeRecipients); err != nil {
		p.errorf("etcdBackup.ageRecipients", "%v", err)
	}

	if b.ScheduleSecret == "" {
		b.ScheduleSecret = DefaultScheduleSecret
	} else if !isDNSSubdomain(b.ScheduleSecret) {
		p.errorf("etcdBackup.scheduleSecret", "%q is not a Kubernetes object name; use e.g. %q", b.ScheduleSecret, DefaultScheduleSecret)
	}

	if b.Schedule != "" {
		if _, err := etcdbackup.ParseSchedule(b.Schedule); err != nil {
			p.errorf("etcdBackup.schedule", "%v", err)
		}

		switch {
		case err != nil:
		case dst.Scheme != "s3":
			p.errorf("etcdBackup.schedule", "needs an s3:// destination: the in-cluster talos-backup CronJob writes to S3 "+
				"only (etcdBackup.destination is %s); remove the schedule or use an S3 bucket", dst.Scheme+"://…")
		case dst.Query.Get("region") == "":
			p.errorf("etcdBackup.destination", "needs region=… with etcdBackup.schedule: the talos-backup CronJob "+
				"reads the bucket's region from it")
		case len(in.AgeRecipients) > 1:
			p.errorf("etcdBackup.ageRecipients", "has %d recipients; with etcdBackup.schedule give one: the talos-backup "+
				"CronJob encrypts to a single age key", len(in.AgeRecipients))
		}
	}

	return b
}

// DataLoss is why a plan leaves a running cluster without its etcd data, for the refusal.
type DataLoss struct {
	// Replaced are the control planes whose VM this `up` replaces, Removed those it removes.
	Replaced, Removed []string
	// Reasons say why each replaced control plane's VM is replaced, by name.
	Reasons map[string]string
}

// CheckDataLoss refuses a plan that leaves no control plane of a running cluster in place (loss
// holds what goes), unless the cluster says how its data survives: an etcd backup (the `up`
// snapshots first and the new bootstrap restores that snapshot; static addresses only, since a
// DHCP node's address is only known once its new VM runs), a snapshot to recover from, or
// allowDataLoss.
func (c *Cluster) CheckDataLoss(loss DataLoss) error {
	if len(loss.Replaced)+len(loss.Removed) == 0 || c.AllowDataLoss {
		return nil
	}

	if c.Recovery != nil && c.Recovery.FromSnapshot != "" {
		return nil
	}

	if c.EtcdBackup != nil && !c.Network.DHCP {
		return nil
	}

	var what []string
	for _, n := range loss.Replaced {
		what = append(what, fmt.Sprintf("replaces control plane %s (%s)", n, loss.Reasons[n]))
	}

	for _, n := range loss.Removed {
		what = append(what, fmt.Sprintf("removes control plane %s", n))
	}

	ways := "configure etcdBackup (the `up` then takes a snapshot first and the new control plane restores it), " +
		"give recovery.fromSnapshot (a snapshot to restore), or set allowDataLoss: true to start with an empty etcd"
	if c.EtcdBackup != nil {
		ways = "with DHCP addressing the snapshot cannot be ordered before the VM's replacement: take one first " +
			"(change etcdBackup.snapshotNow and run `up` without this change), then give its location as " +
			"recovery.fromSnapshot; or set allowDataLoss: true to start with an empty etcd"
	}

	return fmt.Errorf("nodes: this `up` %s, and no control plane of the running cluster would keep etcd's data: "+
		"every Kubernetes object would be lost. To keep them, %s", strings.Join(what, " and "), ways)
}
