package provider

import (
	"reflect"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ClusterToken is the schema token of the component.
const ClusterToken = "talos-proxmox:index:TalosProxmoxCluster"

// typePrefix starts the token of each object type of this package (the provider's module map
// names its module index).
const typePrefix = Name + ":index:"

// TalosProxmoxCluster is a Talos Linux Kubernetes cluster on Proxmox VE.
type TalosProxmoxCluster struct {
	pulumi.ResourceState

	Kubeconfig       pulumi.StringOutput        `pulumi:"kubeconfig" provider:"secret"`
	Talosconfig      pulumi.StringOutput        `pulumi:"talosconfig" provider:"secret"`
	Endpoint         pulumi.StringOutput        `pulumi:"endpoint"`
	ClusterName      pulumi.StringOutput        `pulumi:"clusterName"`
	ControlPlaneIps  pulumi.StringArrayOutput   `pulumi:"controlPlaneIps"`
	WorkerIps        pulumi.StringArrayOutput   `pulumi:"workerIps"`
	Nodes            MapOutput[NodeInfo]        `pulumi:"nodes"`
	SchematicId      pulumi.StringOutput        `pulumi:"schematicId"`
	InstallerImage   pulumi.StringOutput        `pulumi:"installerImage"`
	HelmReleases     MapOutput[HelmReleaseInfo] `pulumi:"helmReleases"`
	LastEtcdSnapshot EtcdSnapshotInfoOutput     `pulumi:"lastEtcdSnapshot"`
	FluxDeployKey    pulumi.StringOutput        `pulumi:"fluxDeployKey"`
}

// HelmReleaseInfo describes a Helm release rendered into the control planes' configuration.
type HelmReleaseInfo struct {
	Chart          string `pulumi:"chart"`
	Version        string `pulumi:"version"`
	Namespace      string `pulumi:"namespace"`
	Digest         string `pulumi:"digest"`
	ManifestSha256 string `pulumi:"manifestSha256"`
	Objects        int    `pulumi:"objects"`
	Bytes          int    `pulumi:"bytes"`
}

// MapOutput is an output of a map of T by name (the nodes' NodeInfo, the releases'
// HelmReleaseInfo).
type MapOutput[T any] struct{ *pulumi.OutputState }

// ElementType is map[string]T.
func (MapOutput[T]) ElementType() reflect.Type {
	return reflect.TypeFor[map[string]T]()
}

// NodeInfo describes a deployed node.
type NodeInfo struct {
	VmId     int    `pulumi:"vmId"`
	Ip       string `pulumi:"ip"`
	HostNode string `pulumi:"hostNode"`
	Role     string `pulumi:"role"`
}

func init() {
	pulumi.RegisterOutputType(MapOutput[NodeInfo]{})
	pulumi.RegisterOutputType(MapOutput[HelmReleaseInfo]{})
	pulumi.RegisterOutputType(EtcdSnapshotInfoOutput{})
}
