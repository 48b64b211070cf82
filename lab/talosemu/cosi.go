package talosemu

import (
	"context"
	"fmt"

	cosiapi "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosmanifests"
)

// The node's resources, served over Talos' COSI State API (what `talosctl get` reads) with the
// machinery's own resource types: MachineStatus, SecurityState, the network's LinkStatus,
// AddressStatus and NodeAddress (network.go, netnode.go; in every mode), the active
// MachineConfig, the STATE and EPHEMERAL VolumeStatus (with their encryption), Nodename, the
// schematic's ExtensionStatus, BootstrapManifestsConfig and, on control planes whose kubelet
// runs, one StaticPodStatus per control-plane static pod. No Diagnostic is ever raised. These are what Talos' health checks
// (pkg/cluster/check) and day-2 code read.

func newResourceState() state.State {
	return state.WrapCore(namespaced.NewState(inmem.Build))
}

// cosiService is the State gRPC service over the node's resources.
func cosiService(st state.State) registeredService {
	return registeredService{&cosiapi.State_ServiceDesc, server.NewState(st)}
}

// put creates or replaces r.
func put(st state.State, r resource.Resource) {
	ctx := context.Background()

	cur, err := st.Get(ctx, r.Metadata())
	if err == nil {
		r.Metadata().SetVersion(cur.Metadata().Version())
		_ = st.Update(ctx, r)

		return
	}

	_ = st.Create(ctx, r)
}

func remove(st state.State, md resource.Pointer) {
	_ = st.Destroy(context.Background(), md)
}

// publishLocked updates the node's resources after a change of state.
func (n *Node) publishLocked() {
	st := n.resources

	n.publishSecurityLocked()

	ms := runtime.NewMachineStatus()
	ms.TypedSpec().Stage = machineStage(n.phase)
	ms.TypedSpec().Status.Ready = n.phase == StateInstalled || n.phase == StateMaintenance
	put(st, ms)

	n.publishNetworkLocked()

	if n.active == nil {
		remove(st, config.NewMachineConfig(nil).Metadata())
		remove(st, k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID).Metadata())
		remove(st, k8s.NewBootstrapManifestsConfig().Metadata())
		remove(st, block.NewVolumeStatus(block.NamespaceName, constants.EphemeralPartitionLabel).Metadata())
		remove(st, block.NewVolumeStatus(block.NamespaceName, constants.StatePartitionLabel).Metadata())

		return
	}

	n.publishExtensionsLocked()

	// The running configuration (`talosctl get machineconfig`), which Talos' upgrade-k8s patches.
	put(st, config.NewMachineConfig(n.active.cfg))

	nn := k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID)
	nn.TypedSpec().Nodename = n.hostnameLocked()
	put(st, nn)

	put(st, n.systemVolumeStatusLocked(constants.StatePartitionLabel, "/dev/sda5", "/system/state", 100<<20))
	put(st, n.systemVolumeStatusLocked(constants.EphemeralPartitionLabel, "/dev/sda6", "/var", n.opts.SystemDiskSizeBytes-200<<20))

	if n.isControlPlaneLocked() {
		facts := talosmanifests.FactsOf(n.active.cfg)
		bm := k8s.NewBootstrapManifestsConfig()
		bm.TypedSpec().CNIName = facts.CNI
		bm.TypedSpec().ClusterDomain = facts.DNSDomain
		bm.TypedSpec().PodCIDRs = facts.PodCIDRs
		bm.TypedSpec().ProxyEnabled = facts.ProxyEnabled
		bm.TypedSpec().ProxyImage = facts.ProxyImage
		bm.TypedSpec().CoreDNSEnabled = facts.CoreDNSEnabled
		bm.TypedSpec().CoreDNSImage = facts.CoreDNSImage
		put(st, bm)
	}
}

// setStaticPods publishes (running) or removes the control-plane static pods' statuses.
func (n *Node) setStaticPods(running bool) {
	n.mu.Lock()
	defer n.mu.Unlock()

	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		id := fmt.Sprintf("kube-system/%s-%s", name, n.hostnameLocked())
		sp := k8s.NewStaticPodStatus(k8s.NamespaceName, id)

		if !running || !n.isControlPlaneLocked() {
			remove(n.resources, sp.Metadata())

			continue
		}

		sp.TypedSpec().PodStatus = map[string]any{
			"phase":      "Running",
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
		}
		put(n.resources, sp)
	}
}

func machineStage(s State) runtime.MachineStage {
	switch s {
	case StateMaintenance:
		return runtime.MachineStageMaintenance
	case StateInstalling:
		return runtime.MachineStageInstalling
	case StateInstalled, StateBootstrapped:
		return runtime.MachineStageRunning
	case StateRebooting:
		return runtime.MachineStageRebooting
	default:
		return runtime.MachineStageShuttingDown
	}
}
