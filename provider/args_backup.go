package provider

import (
	"reflect"

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

// Recovery restores the cluster's etcd from a snapshot when it has none running.
type Recovery struct {
	FromSnapshot string             `pulumi:"fromSnapshot,optional"`
	AgeIdentity  pulumi.StringInput `pulumi:"ageIdentity,optional" provider:"secret"`
}

// EtcdSnapshotInfo describes the last etcd snapshot the component took.
type EtcdSnapshotInfo struct {
	Location string `pulumi:"location"`
	Revision int    `pulumi:"revision"`
	Size     int    `pulumi:"size"`
	Sha256   string `pulumi:"sha256"`
	TakenAt  string `pulumi:"takenAt"`
}

// EtcdSnapshotInfoOutput is an output of an EtcdSnapshotInfo.
type EtcdSnapshotInfoOutput struct{ *pulumi.OutputState }

// ElementType is EtcdSnapshotInfo.
func (EtcdSnapshotInfoOutput) ElementType() reflect.Type {
	return reflect.TypeFor[EtcdSnapshotInfo]()
}
