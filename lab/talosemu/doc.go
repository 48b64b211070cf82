// Package talosemu emulates Talos Linux nodes for tests and for the local lab: one gRPC server per
// node on a loopback address (127.0.0.x:50000), serving Talos' own MachineService and
// StorageService definitions and judging configurations with Talos' own config loader and
// validator, so that the real Talos client (pkg/machinery/client), the Talos Terraform provider's
// call sequence and talosctl-style code talk to it as to a Proxmox VM running Talos' nocloud image.
//
// # Life of a node
//
// Start brings a node up in maintenance mode: TLS with a self-signed certificate and no client
// certificate, like a freshly booted nocloud VM. ApplyConfiguration loads the configuration with
// configloader and validates it (NocloudMode, see Options.ValidationMode, with the install
// instructions the node's Talos version requires); the node then
// "installs" (the API is down for Options.InstallDelay) and comes back serving mutual TLS: a server
// certificate issued by the configuration's OS CA (machine.ca) for the node's IP, hostname and
// machine.certSANs, and only client certificates that chain to that CA (or machine.acceptedCAs).
// The insecure Disks probe the Talos provider starts with therefore fails from then on, and the
// provider falls back to its talosconfig, exactly as with a real node.
//
// Nodes of one Cluster registry behave as one cluster. Every control plane runs a real etcd
// member (embedded etcd, lab/etcdmember) on its address with the cluster's etcd CA: Bootstrap starts
// a one-member cluster (asynchronously, as Talos does; AlreadyExists "etcd data directory is not
// empty" once there is data), every other up control plane with the same etcd CA joins it as
// Talos' etcd service does (removing a stale member of the same name, adding itself as a
// learner, promoting itself). The etcd APIs (EtcdMemberList, EtcdStatus, EtcdForfeitLeadership,
// EtcdLeaveCluster, EtcdRemoveMemberByID) answer from that cluster with machined's semantics and
// texts. A node that is closed (its VM powered off or deleted) hard-stops its member, which stays
// in the member list; quorum loss is real. A reboot stops the member gracefully and starts it again
// from its data; a reset wiping EPHEMERAL leaves etcd first when graceful (failing the reset if
// etcd refuses, e.g. for its last member), else leaves a dead member behind. A worker's API
// certificate is signed with the OS CA key of an up control plane (trustd), and the `node` and
// `nodes` metadata route calls to other nodes like apid does. Backups and disaster recovery are
// real too (etcdbackup.go): EtcdSnapshot streams a snapshot of the node's own member, EtcdRecover
// stores an upload as the node's /var/lib/etcd.snapshot, and Bootstrap with RecoverEtcd restores
// it with etcdutl into a one-member cluster named after the node, which the other control planes
// then join. Reset wiping STATE goes back to
// maintenance mode; Reboot activates a STAGED configuration. With Options.Disk, a node keeps its
// installed configuration, version and etcd data across Close and Start (a VM power cycle).
//
// # Faithful to Talos (v1.10–v1.13 behaviour, checked against its sources)
//
//   - Maintenance mode: ApplyConfiguration accepts AUTO, REBOOT and TRY only (others Unimplemented
//     "apply configuration --mode='…' is not supported in maintenance mode"); a parse error is a
//     plain error (codes.Unknown), a validation error InvalidArgument "configuration validation
//     failed: …"; the reply carries warnings only, dry-run the maintenance summary. Version and
//     Reset answer Unimplemented "API is not implemented in maintenance mode"; methods the
//     maintenance server lacks (Bootstrap, Kubeconfig, ServiceList, EtcdMemberList, Reboot)
//     answer grpc-go's Unimplemented "method X not implemented". Disks works in both modes.
//   - Configured: ApplyConfiguration with machined's messages and modes: NO_REBOOT and TRY only for
//     changes Talos applies live (its CanApplyImmediate field list, ported), AUTO resolving to
//     NO_REBOOT or REBOOT, STAGED persisting until the next reboot, TRY reverting after its
//     timeout, dry_run with "Dry run summary", Messages[].Mode and ModeDetails as machined sets
//     them; validation no longer requires an install section once installed.
//   - Bootstrap refusals (worker: FailedPrecondition "bootstrap can only be performed on a control
//     plane node"), Kubeconfig and EtcdMemberList on a worker (Unimplemented "… is only available on
//     control plane nodes"), Reset request validation, the kubeconfig tar.gz with one file named
//     "kubeconfig" in Talos' admin kubeconfig layout (admin@cluster context, cluster CA data, a
//     client certificate from cluster.ca with adminKubeconfig's common name, organization and
//     lifetime, the cluster endpoint as server).
//   - etcd backup and recovery (v1.14.1, EtcdSnapshot, EtcdRecover, BootstrapEtcd and
//     recoverFromSnapshot): workers are refused with Unimplemented "etcd snapshot|etcd recover is
//     only available on control plane nodes"; EtcdSnapshot asks the node's own endpoint through a
//     real clientv3 (Maintenance.Snapshot) and sends 1 KiB messages, so a node whose member does
//     not run makes the call wait until its deadline ("failed reading etcd snapshot: context
//     deadline exceeded"), and a snapshot stream that breaks off ends the call successfully, as
//     machined's chunker does. EtcdRecover does not look at etcd (an upload to a running member
//     is stored) and moves the upload into place once complete. Bootstrap with RecoverEtcd checks
//     only what a plain one does (AlreadyExists "etcd data directory is not empty") and answers at
//     once; the etcd service then verifies the snapshot (etcdutl's Status), restores it
//     (etcdutl's Restore, v3.7.1: the sha256 digest must be present and match unless
//     RecoverSkipHashCheck), deletes the upload and starts the member. A failure leaves the etcd
//     service "Failed" in ServiceList with machined's message ("Failed to run pre stage: error
//     verifying snapshot: …" / "error recovering from the snapshot: expected sha256 …") until the
//     next boot or bootstrap; what etcdutl wrote before a hash mismatch stays, so Bootstrap then
//     answers AlreadyExists until EPHEMERAL is wiped.
//
// # Simplified or stricter (by choice)
//
//   - Kubernetes (with ClusterOptions.Kube): one real API server, controller-manager and scheduler
//     per cluster on the configured endpoint (lab/kubecp), an emulated kubelet per booted node
//     (lab/kubeletemu; ServiceList reports kubelet healthy while it runs) and Talos' manifests
//     created once (lab/talosmanifests). Without Kube, kubelet is healthy once etcd runs.
//     The kubelet follows machine.kubelet.extraArgs provider-id (else extraConfig providerID) and
//     cloud-provider (else external with cluster.externalCloudProvider.enabled), as Talos passes
//     them: the Node gets the providerID and the uninitialized taint, which stays (no cloud
//     controller manager runs).
//     Bootstrapping a second etcd cluster in a registry that runs one is refused
//     (FailedPrecondition) rather than splitting the cluster. A failed graceful reset fails the
//     Reset call itself; on Talos the call succeeds and the reset sequence fails afterwards.
//   - Kubeconfig needs this control plane to be an etcd member (else FailedPrecondition); real
//     Talos hands it out earlier, but no API server could answer it then.
//   - NocloudMode requires machine.install; Talos' nocloud platform validates in "cloud" mode.
//   - A configured node refuses (InvalidArgument) a configuration with another machine.ca (unless
//     the running CA is kept in machine.acceptedCAs) or another machine.type: Talos would accept the
//     first and lock every current client out, which here always means regenerated secrets.
//   - No role-based authorization beyond "client certificate signed by the OS CA"; no events,
//     logs or dmesg; Read serves the boot id only; the COSI State API holds MachineStatus, MachineConfig,
//     VolumeStatus EPHEMERAL, Nodename, BootstrapManifestsConfig and StaticPodStatus only; Reset's
//     Reboot flag changes nothing (the node always comes back).
//   - Upgrades (upgrade.go) change the version (and schematic) the node reports after its reboot;
//     nothing is installed. Before v1.13 only the legacy Upgrade exists (etcd validated as
//     machined's ValidateForUpgrade does, unless forced or preserving); from v1.13 ImageService.Pull
//     and LifecycleService.Upgrade too (no etcd check, a reboot activates it).
//   - Dry-run and immediate-mode diffs are plain line diffs of the encoded configurations.
//   - Fan-out (`nodes` metadata) is emulated for unary calls only.
//   - An EtcdSnapshot whose caller sets no deadline gives up after 15 s like the other etcd calls
//     (machined would wait for its member indefinitely). EtcdRecover never answers "etcd service
//     is not ready for recovery yet": a configured emulated node always has /var/lib.
//
// # Test knobs
//
// Options.Latency delays every call; Options.FailureRate fails that share of calls with
// codes.Unavailable, drawn from a source seeded with Options.Seed (reproducible for sequential
// callers); Options.Unreachable makes a node never come up, either refusing connections (fast
// failures) or accepting TCP and never finishing the TLS handshake (clients hit their deadline);
// Options.InstallDelay and Options.RebootDelay set how long the API is down;
// Options.InvalidArgumentOnParseError turns the maintenance-mode parse error into InvalidArgument
// so that retrying clients fail fast. Options.Faults (or Node.SetFaults) fail upgrades, roll a
// new version back at boot, fail image pulls, fail EtcdSnapshot with a chosen code
// (Faults.SnapshotError) or make it stream half a snapshot successfully
// (Faults.SnapshotTruncated); Node.StopEtcd crashes a node's etcd member until its next boot;
// KubeOptions.HungPod keeps chosen pods terminating forever (a hung drain). Cluster.Events is the
// cluster's ordered log (reboots, boots, bootstraps, etcd members, Ready nodes, and the backup
// steps "etcd-snapshot", "etcd-recover", "etcd-restore"; see Event). SharedBundle generates one
// secrets bundle per process and configurations from it (contract v1.11, single v1alpha1
// document).
package talosemu
