// Package lifecycle holds the custom resources the plugin serves beside the component. The
// component registers them (provider/internal/wire); users do not need to. Each is a thin adapter
// over provider/internal/day2, one file each with its Args, State and CRUD:
//
//   - ClientCredentials: the admin talosconfig and kubeconfig, issued from the cluster's CAs and
//     renewed before they expire (credentials.go);
//   - NodeAddress: a DHCP node's address, from the guest agent or found by its MAC (nodeaddress.go);
//   - NodeUpgrade: a node's Talos version and image, upgraded in place with its gates
//     (nodeupgrade.go);
//   - KubernetesUpgrade: the cluster's Kubernetes version, component by component
//     (kubernetesupgrade.go);
//   - NodeConfig: a running node's configuration, applied live or with a reboot (nodeconfig.go);
//   - NodeRetire and Membership: nodes that leave, with the etcd quorum rules (noderetire.go,
//     membership.go);
//   - ClusterHealth: the health gate every change ends with (health.go);
//   - ManifestSync: the cluster's manifests, applied server-side with pruning (manifestsync.go);
//   - EtcdSnapshot and EtcdBootstrap: etcd snapshots, and the bootstrap from one (etcdsnapshot.go,
//     etcdbootstrap.go);
//   - AdoptedSecrets: an adopted cluster's secrets bundle and the client certificate issued from
//     it (adoptedsecrets.go).
//
// args.go holds the argument heads they share (ClusterAccess, TalosCA, NodeRef, ClusterNodes, Waits) with
// their descriptions, and the shared helpers; resources.go lists what the plugin serves; kind.go
// is the typed seam the component registers them through (Kind, Inputs, Set), which the tests
// check against the served schema.
//
// # Adding a resource
//
// One file, say etcdsnapshot.go, with the resource, its Args (embedding the heads it shares, each
// field described by its doc tag), its State, CRUD, and its Kind:
//
//	type EtcdSnapshot struct{}
//
//	// docEtcdSnapshot describes EtcdSnapshot in the schema.
//	const docEtcdSnapshot = "…"
//
//	type EtcdSnapshotArgs struct {
//		ClusterAccess
//		NodeRef
//		Timeout string `pulumi:"timeout" doc:"How long the snapshot may take (a duration)."`
//	}
//
//	type EtcdSnapshotState = EtcdSnapshotArgs // or a struct embedding the Args, plus outputs
//
//	func (r *EtcdSnapshot) Annotate(an infer.Annotator) { an.Describe(r, docEtcdSnapshot) }
//	func (a *EtcdSnapshotArgs) Annotate(an infer.Annotator) { describeFields(an, a) }
//
//	var EtcdSnapshotKind = kindOf[EtcdSnapshot, EtcdSnapshotArgs, Registered]()
//
// Then serve it (list it in resources.go's served, which provider.go serves), list its Kind in
// seam_test.go's kinds, run `make codegen`, and register it from provider/internal/wire, setting
// each input on its Args field (the compiler checks the input's type against the field's):
//
//	in, a := lifecycle.EtcdSnapshotKind.Inputs()
//	setAccess(in, &a.ClusterAccess, r)
//	setNodeRef(in, &a.NodeRef, n, m)
//	lifecycle.Set(in, &a.Timeout, pulumi.String(c.Etcd.Timeout.String()))
//	snap, err := lifecycle.EtcdSnapshotKind.Register(s.Ctx, s.child(n.Name+"-etcd-snapshot"), in, s.parent(), self.option)
//
// Register refuses inputs that leave out a required one. A resource whose outputs the component
// reads has an outputs view instead of Registered (a struct embedding
// pulumi.CustomResourceState with one pulumi.XOutput field per State property it reads).
package lifecycle
