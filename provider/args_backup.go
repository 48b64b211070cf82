package provider

import (
	"reflect"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// EtcdBackup configures etcd snapshots: before every change that can lose etcd's data or quorum,
// on demand, and on a schedule inside the cluster.
type EtcdBackup struct {
	Destination    string   `pulumi:"destination"`
	Keep           *int     `pulumi:"keep,optional"`
	AgeRecipients  []string `pulumi:"ageRecipients,optional"`
	Required       *bool    `pulumi:"required,optional"`
	SnapshotNow    string   `pulumi:"snapshotNow,optional"`
	Schedule       string   `pulumi:"schedule,optional"`
	ScheduleSecret string   `pulumi:"scheduleSecret,optional"`
}

// Annotate documents the etcd backups.
func (b *EtcdBackup) Annotate(an infer.Annotator) {
	an.Describe(b, "etcd snapshots through the Talos API (what `talosctl etcd snapshot` takes), verified with etcd's "+
		"own snapshot status before they count. One snapshot is taken in every `pulumi up` that upgrades Talos or "+
		"Kubernetes, removes, replaces or adds a control plane, before the first node is touched; a failed snapshot "+
		"stops the `up` there. See docs/operations.md, Backups and disaster recovery.")
	an.Describe(&b.Destination, "Where snapshots go, as a URL in the forms Pulumi's state backends use: "+
		"`file:///abs/dir` or `s3://bucket/prefix?endpoint=https://…&region=…&s3ForcePathStyle=true` (credentials from "+
		"the standard AWS environment variables or profile of the machine running Pulumi, never from the program). "+
		"Objects are named `<prefix>/<clusterName>/etcd-<UTC time>-r<revision>.snapshot` (`.age` when encrypted).")
	an.Describe(&b.Keep, "How many of this cluster's snapshots to keep at the destination; older ones that this "+
		"cluster wrote are deleted after a new one is stored, other objects never. Default: 10.")
	an.Describe(&b.AgeRecipients, "age X25519 public keys (`age1…`): snapshots are encrypted to all of them (the "+
		"format siderolabs/talos-backup writes). Restoring one then needs `recovery.ageIdentity`.")
	an.Describe(&b.Required, "Stop the `up` when the snapshot fails (default: true). False takes the change "+
		"without a snapshot and says so in Pulumi's log.")
	an.Describe(&b.SnapshotNow, "Any string: changing it takes a snapshot at the next `up` even if nothing else "+
		"changed.")
	an.Describe(&b.Schedule, "A cron schedule (5 fields, e.g. `0 */6 * * *`) for snapshots taken inside the "+
		"cluster by siderolabs' talos-backup CronJob (kube-system), to the same S3 destination; the control planes "+
		"then grant it Talos API access with the `os:etcd:backup` role. S3 destinations only.")
	an.Describe(&b.ScheduleSecret, "Name of a Secret in kube-system holding `AWS_ACCESS_KEY_ID` and "+
		"`AWS_SECRET_ACCESS_KEY` for the talos-backup CronJob (create it yourself; the component never handles S3 "+
		"keys). Default: `talos-backup-s3`.")
}

// Recovery restores the cluster's etcd from a snapshot when it has none running.
type Recovery struct {
	FromSnapshot string             `pulumi:"fromSnapshot,optional"`
	AgeIdentity  pulumi.StringInput `pulumi:"ageIdentity,optional" provider:"secret"`
}

// Annotate documents the recovery.
func (r *Recovery) Annotate(an infer.Annotator) {
	an.Describe(r, "Disaster recovery: when the cluster has no running etcd (every control plane lost, or replaced "+
		"in this `up`), the bootstrap uploads a snapshot to the first control plane and bootstraps etcd from it "+
		"(Talos' `bootstrap --recover-from`); the other control planes join it.")
	an.Describe(&r.FromSnapshot, "URL of the snapshot object (`file:///…/etcd-….snapshot` or `s3://bucket/key?…`, "+
		"as `lastEtcdSnapshot.location` gives). It is downloaded and verified before any VM is touched. Default: "+
		"the snapshot this `up` takes first (with `etcdBackup`).")
	an.Describe(&r.AgeIdentity, "age identity (`AGE-SECRET-KEY-1…`, a secret) that decrypts an encrypted snapshot.")
}

// EtcdSnapshotInfo describes the last etcd snapshot the component took.
type EtcdSnapshotInfo struct {
	Location string `pulumi:"location"`
	Revision int    `pulumi:"revision"`
	Size     int    `pulumi:"size"`
	Sha256   string `pulumi:"sha256"`
	TakenAt  string `pulumi:"takenAt"`
}

// Annotate documents a snapshot's outputs.
func (s *EtcdSnapshotInfo) Annotate(an infer.Annotator) {
	an.Describe(s, "An etcd snapshot the component took and verified.")
	an.Describe(&s.Location, "URL of the object (usable as `recovery.fromSnapshot`); empty when there is none.")
	an.Describe(&s.Revision, "etcd revision of the snapshot.")
	an.Describe(&s.Size, "Size of the snapshot in bytes (before encryption).")
	an.Describe(&s.Sha256, "sha256 of the snapshot (before encryption), hex.")
	an.Describe(&s.TakenAt, "When it was taken (RFC 3339, UTC).")
}

// EtcdSnapshotInfoOutput is an output of an EtcdSnapshotInfo.
type EtcdSnapshotInfoOutput struct{ *pulumi.OutputState }

// ElementType is EtcdSnapshotInfo.
func (EtcdSnapshotInfoOutput) ElementType() reflect.Type {
	return reflect.TypeFor[EtcdSnapshotInfo]()
}
