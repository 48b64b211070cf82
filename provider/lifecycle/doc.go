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
//   - ManifestSync: the cluster's manifests, applied server-side with pruning (manifestsync.go).
//
// args.go holds the argument heads they share (how to reach the cluster, which node) and their
// shared helpers; kind.go is the typed seam the component registers them through (token, inputs,
// outputs of each resource), which the tests check against the served schema.
package lifecycle
