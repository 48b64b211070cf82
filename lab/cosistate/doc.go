// Package cosistate is the COSI resource API of one emulated Talos node: what `talosctl get`
// shows and what Talos' health checks (pkg/cluster/check) and day-2 code read through the
// machinery client's COSI state (client.COSI with safe.StateGet, safe.StateListAll, Watch).
//
// A State is an in-memory namespaced COSI state with the namespaces and resource definitions
// machined registers at boot, served by cosi-project/runtime's own gRPC server
// (pkg/state/protobuf/server) behind machined's access policy: reads only (writes answer
// PermissionDenied "write access is not allowed"), of registered types in registered namespaces
// (others answer PermissionDenied "resource type … is not supported"). The resource types are the
// machinery's own, so clients decode them with their registered protobuf specs.
//
// The node emulator writes what changes as the node lives:
//
//   - runtime.MachineStatus (SetMachineStatus): stage and readiness; the health check watches it
//     until every node is running, `talosctl bootstrap` waits for booting or running.
//   - k8s.StaticPodStatus (SetStaticPods, SetNodename): one per control-plane static pod, named
//     "kube-system/<pod>-<nodename>", holding the kubelet's pod status as machined copies it.
//   - block.VolumeStatus EPHEMERAL (SetEphemeralVolume): size checked against MinEphemeralSize.
//   - runtime.Diagnostic (SetDiagnostics): none means healthy.
//   - k8s.BootstrapManifestsConfig (SetBootstrapManifests, BootstrapManifestsFromConfig): control
//     planes only; its CNI name "none" makes the health check skip waiting for Ready nodes.
//   - k8s.Nodename, runtime.Version, runtime.ExtensionStatus with the Image Factory's "schematic"
//     extension (SetSchematic), v1alpha1.Service (SetServices), cluster.Member (SetMembers),
//     config.MachineConfig and config.MachineType (SetMachineConfig).
//
// Resources carry the owners machined's controllers give them. Anything else can be written
// through Resources. Clear empties the state (a reset or a power-off); watchers see the
// resources destroyed.
//
// Simplified: every caller counts as os:admin (sensitive resources such as the machine
// configuration are served to all); apid's `node` metadata is not looked at (routing is the node
// emulator's business); the readiness in MachineStatus is what the emulator says, not derived from
// the other resources as machined's MachineStatusController does.
package cosistate
