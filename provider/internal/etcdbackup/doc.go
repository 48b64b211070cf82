// Package etcdbackup takes, keeps and fetches etcd snapshots of a Talos cluster: Take streams a
// snapshot from a control plane (Talos' EtcdSnapshot), verifies it with etcd's own code, encrypts
// it with age when given recipients and writes it to a file:// or s3:// destination (the URL forms
// of Pulumi's state backends), then prunes the cluster's older snapshots. Fetch brings one back,
// decrypted and verified, for a disaster recovery. CronJobManifests renders scheduled in-cluster
// backups by siderolabs/talos-backup. Nothing here depends on Pulumi.
package etcdbackup
