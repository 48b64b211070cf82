package cosistate

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/registry"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/cri"
	"github.com/siderolabs/talos/pkg/machinery/resources/etcd"
	"github.com/siderolabs/talos/pkg/machinery/resources/files"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/kubeaccess"
	"github.com/siderolabs/talos/pkg/machinery/resources/kubespan"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/perf"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/secrets"
	"github.com/siderolabs/talos/pkg/machinery/resources/security"
	"github.com/siderolabs/talos/pkg/machinery/resources/siderolink"
	"github.com/siderolabs/talos/pkg/machinery/resources/time"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
)

// namespaces are the namespaces machined registers at boot (v1alpha2_state.go of Talos v1.13.9),
// with its descriptions; `meta` comes from the namespace registry's defaults.
var namespaces = []struct {
	name        string
	description string
}{
	{v1alpha1.NamespaceName, "Talos v1alpha1 subsystems glue resources."},
	{cluster.NamespaceName, "Cluster configuration and discovery resources."},
	{cluster.RawNamespaceName, "Cluster unmerged raw resources."},
	{config.NamespaceName, "Talos node configuration."},
	{etcd.NamespaceName, "etcd resources."},
	{files.NamespaceName, "Files and file-like resources."},
	{hardware.NamespaceName, "Hardware resources."},
	{k8s.NamespaceName, "Kubernetes all node types resources."},
	{k8s.ControlPlaneNamespaceName, "Kubernetes control plane resources."},
	{kubespan.NamespaceName, "KubeSpan resources."},
	{network.NamespaceName, "Networking resources."},
	{network.ConfigNamespaceName, "Networking configuration resources."},
	{cri.NamespaceName, "CRI Seccomp resources."},
	{secrets.NamespaceName, "Resources with secret material."},
	{security.NamespaceName, "Security resources."},
	{perf.NamespaceName, "Stats resources."},
}

// definitions are the resource types machined registers at boot, in its order (v1alpha2_state.go
// of Talos v1.13.9). Registering them all lets `talosctl get` resolve every type and alias and
// makes the access policy answer as on Talos: types outside this list are "not supported".
func definitions() []meta.ResourceWithRD {
	return []meta.ResourceWithRD{
		&block.Device{},
		&block.DiscoveredVolume{},
		&block.DiscoveryRefreshRequest{},
		&block.DiscoveryRefreshStatus{},
		&block.Disk{},
		&block.MountRequest{},
		&block.MountStatus{},
		&block.SwapStatus{},
		&block.Symlink{},
		&block.SystemDisk{},
		&block.UserDiskConfigStatus{},
		&block.VolumeConfig{},
		&block.VolumeLifecycle{},
		&block.VolumeMountRequest{},
		&block.VolumeMountStatus{},
		&block.VolumeStatus{},
		&block.ZswapStatus{},
		&cluster.Affiliate{},
		&cluster.Config{},
		&cluster.Identity{},
		&cluster.Info{},
		&cluster.Member{},
		&config.MachineConfig{},
		&config.MachineType{},
		&cri.ImageCacheConfig{},
		&cri.SeccompProfile{},
		&etcd.Config{},
		&etcd.PKIStatus{},
		&etcd.Spec{},
		&etcd.Member{},
		&files.EtcFileSpec{},
		&files.EtcFileStatus{},
		&hardware.MemoryModule{},
		&hardware.PCIDevice{},
		&hardware.PCIDriverRebindConfig{},
		&hardware.PCIDriverRebindStatus{},
		&hardware.PCRStatus{},
		&hardware.Processor{},
		&hardware.SystemInformation{},
		&k8s.AdmissionControlConfig{},
		&k8s.AuditPolicyConfig{},
		&k8s.AuthorizationConfig{},
		&k8s.APIServerConfig{},
		&k8s.KubePrismEndpoints{},
		&k8s.ConfigStatus{},
		&k8s.ControllerManagerConfig{},
		&k8s.Endpoint{},
		&k8s.ExtraManifestsConfig{},
		&k8s.KubeletConfig{},
		&k8s.KubeletKubeconfig{},
		&k8s.KubeletLifecycle{},
		&k8s.KubeletSpec{},
		&k8s.KubePrismConfig{},
		&k8s.KubePrismStatuses{},
		&k8s.Manifest{},
		&k8s.ManifestStatus{},
		&k8s.BootstrapManifestsConfig{},
		&k8s.NodeAnnotationSpec{},
		&k8s.NodeCordonedSpec{},
		&k8s.NodeIP{},
		&k8s.NodeIPConfig{},
		&k8s.NodeLabelSpec{},
		&k8s.Nodename{},
		&k8s.NodeStatus{},
		&k8s.NodeTaintSpec{},
		&k8s.SchedulerConfig{},
		&k8s.StaticPod{},
		&k8s.StaticPodServerStatus{},
		&k8s.StaticPodStatus{},
		&k8s.SecretsStatus{},
		&kubeaccess.Config{},
		&kubespan.Config{},
		&kubespan.Endpoint{},
		&kubespan.Identity{},
		&kubespan.PeerSpec{},
		&kubespan.PeerStatus{},
		&network.AddressStatus{},
		&network.AddressSpec{},
		&network.DeviceConfigSpec{},
		&network.DNSResolveCache{},
		&network.DNSUpstream{},
		&network.EthernetSpec{},
		&network.EthernetStatus{},
		&network.HardwareAddr{},
		&network.HostDNSConfig{},
		&network.HostnameStatus{},
		&network.HostnameSpec{},
		&network.LinkAliasSpec{},
		&network.LinkRefresh{},
		&network.LinkStatus{},
		&network.LinkSpec{},
		&network.NfTablesChain{},
		&network.NodeAddress{},
		&network.NodeAddressFilter{},
		&network.NodeAddressSortAlgorithm{},
		&network.OperatorSpec{},
		&network.PlatformConfig{},
		&network.ProbeSpec{},
		&network.ProbeStatus{},
		&network.ResolverStatus{},
		&network.ResolverSpec{},
		&network.RouteStatus{},
		&network.RouteSpec{},
		&network.RoutingRuleSpec{},
		&network.RoutingRuleStatus{},
		&network.Status{},
		&network.TimeServerStatus{},
		&network.TimeServerSpec{},
		&perf.CPU{},
		&perf.Memory{},
		&cri.RegistriesConfig{},
		&runtime.APIServiceConfig{},
		&runtime.BootedEntry{},
		&runtime.DevicesStatus{},
		&runtime.Diagnostic{},
		&runtime.Environment{},
		&runtime.EventSinkConfig{},
		&runtime.ExtensionServiceConfig{},
		&runtime.ExtensionServiceConfigStatus{},
		&runtime.ExtensionStatus{},
		&runtime.KernelCmdline{},
		&runtime.KernelModuleSpec{},
		&runtime.KernelParamSpec{},
		&runtime.KernelParamDefaultSpec{},
		&runtime.KernelParamStatus{},
		&runtime.KmsgLogConfig{},
		&runtime.LoadedKernelModule{},
		&runtime.MaintenanceServiceConfig{},
		&runtime.MaintenanceServiceRequest{},
		&runtime.MachineResetSignal{},
		&runtime.MachineStatus{},
		&runtime.MetaKey{},
		&runtime.MetaLoaded{},
		&runtime.MountStatus{},
		&runtime.OOMAction{},
		&runtime.PlatformMetadata{},
		&runtime.SBOMItem{},
		&runtime.SecurityState{},
		&runtime.ServicePID{},
		&runtime.UniqueMachineToken{},
		&runtime.Version{},
		&runtime.WatchdogTimerConfig{},
		&runtime.WatchdogTimerStatus{},
		&secrets.API{},
		&secrets.CertSAN{},
		&secrets.EncryptionSalt{},
		&secrets.Etcd{},
		&secrets.EtcdRoot{},
		&secrets.Kubelet{},
		&secrets.Kubernetes{},
		&secrets.KubernetesDynamicCerts{},
		&secrets.KubernetesRoot{},
		&secrets.MaintenanceRoot{},
		&secrets.OSRoot{},
		&secrets.Trustd{},
		&security.ImageVerificationRule{},
		&security.TUFTrustedRoot{},
		&siderolink.Config{},
		&siderolink.Status{},
		&siderolink.Tunnel{},
		&time.AdjtimeStatus{},
		&time.Status{},
		&v1alpha1.AcquireConfigSpec{},
		&v1alpha1.AcquireConfigStatus{},
		&v1alpha1.Service{},
	}
}

// register creates the namespace and resource definitions in st, as machined does at boot.
func register(ctx context.Context, st state.State) error {
	nsRegistry := registry.NewNamespaceRegistry(st)
	if err := nsRegistry.RegisterDefault(ctx); err != nil {
		return fmt.Errorf("cosistate: registering the meta namespace: %w", err)
	}

	rdRegistry := registry.NewResourceRegistry(st)
	if err := rdRegistry.RegisterDefault(ctx); err != nil {
		return fmt.Errorf("cosistate: registering the meta resource definitions: %w", err)
	}

	for _, ns := range namespaces {
		if err := nsRegistry.Register(ctx, ns.name, ns.description); err != nil {
			return fmt.Errorf("cosistate: registering namespace %s: %w", ns.name, err)
		}
	}

	for _, r := range definitions() {
		if err := rdRegistry.Register(ctx, r); err != nil {
			return fmt.Errorf("cosistate: registering %s: %w", r.ResourceDefinition().Type, err)
		}
	}

	return nil
}
