// Package day2 operates a running Talos cluster, in-process through each system's own Go client:
// Talos through the machinery client, etcd through Talos' etcd API, Kubernetes through client-go
// (no talosctl, no kubectl, no helm binary). It holds
//
//   - access to a cluster from the component's talosconfig and kubeconfig (access.go);
//   - the health gate and the checks it runs: Talos' own cluster checks plus Nodes Ready and etcd
//     members healthy (health.go, checks.go, condition.go);
//   - the gates around every change — etcd healthy, the node back, Ready — and the Talos version
//     rules (gates.go, version.go, observe.go);
//   - a node's Talos upgrade, with its drain and uncordon (upgrade.go, drain.go);
//   - a running node's configuration apply, live or with a reboot (config.go);
//   - the Kubernetes upgrade, component by component, after upgrade-k8s' own pre-checks (kubernetes.go);
//   - etcd membership when nodes leave, with the quorum rules, and a node's retirement (membership.go,
//     retire.go);
//   - manifest sync: server-side apply with an inventory and pruning (sync.go, manifests.go,
//     namespaced.go);
//   - which errors of these protocols are worth another try (transient.go).
//
// It imports no Pulumi package: provider/lifecycle wraps it in Pulumi resources.
package day2
