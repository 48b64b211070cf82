package provider

import (
	"reflect"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ClusterToken is the schema token of the component.
const ClusterToken = "talos-proxmox:index:TalosProxmoxCluster"

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
}

// Annotate documents the component and its outputs.
func (c *TalosProxmoxCluster) Annotate(an infer.Annotator) {
	an.Describe(c, "A Talos Linux Kubernetes cluster on Proxmox VE: the Talos image from the Image Factory, "+
		"one VM per node, the Talos machine secrets and configuration, the bootstrap of etcd and the "+
		"kubeconfig, in one resource.")
	an.Describe(&c.Kubeconfig, "Admin kubeconfig of the cluster (a secret). Write it to a file to use kubectl.")
	an.Describe(&c.Talosconfig, "talosctl client configuration (a secret), with every control plane as an "+
		"endpoint and every node as a node.")
	an.Describe(&c.Endpoint, "Kubernetes API URL, e.g. `https://10.0.0.10:6443`.")
	an.Describe(&c.ClusterName, "Name of the cluster.")
	an.Describe(&c.ControlPlaneIps, "Addresses of the control plane nodes, in name order.")
	an.Describe(&c.WorkerIps, "Addresses of the worker nodes, in name order.")
	an.Describe(&c.Nodes, "Every node by hostname: its Proxmox VM id, address, Proxmox host and role.")
	an.Describe(&c.SchematicId, "Image Factory schematic id of the Talos image.")
	an.Describe(&c.InstallerImage, "Installer image in every node's configuration: Talos installs from it, and `talosctl upgrade --image` with it upgrades a node to `talosVersion`.")
	an.Describe(&c.HelmReleases, "Every Helm release rendered into the control planes' configuration (Cilium "+
		"and `helmCharts`), by release name: the chart, its digest and what was rendered.")
	an.Describe(&c.LastEtcdSnapshot, "The last etcd snapshot the component took (with `etcdBackup`): where it is, "+
		"its revision, size, sha256 and time; empty (`location` \"\") without `etcdBackup` or before the first "+
		"snapshot. Not secret.")
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

// Annotate documents a release's outputs.
func (h *HelmReleaseInfo) Annotate(an infer.Annotator) {
	an.Describe(h, "A Helm release rendered by the component.")
	an.Describe(&h.Chart, "Name of the chart, from its Chart.yaml.")
	an.Describe(&h.Version, "Version of the chart rendered, from its Chart.yaml.")
	an.Describe(&h.Namespace, "Namespace the release was rendered into.")
	an.Describe(&h.Digest, "`sha256:<hex>` of the chart archive rendered; empty for a local chart directory. "+
		"Pin it with `digest`.")
	an.Describe(&h.ManifestSha256, "sha256 of the rendered manifests: it changes exactly when the control "+
		"planes' configuration changes because of this release.")
	an.Describe(&h.Objects, "Number of Kubernetes objects rendered.")
	an.Describe(&h.Bytes, "Size of the rendered manifests in bytes.")
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

// Annotate documents a node's outputs.
func (n *NodeInfo) Annotate(an infer.Annotator) {
	an.Describe(n, "A deployed node.")
	an.Describe(&n.VmId, "Proxmox VM id.")
	an.Describe(&n.Ip, "IPv4 address of the node.")
	an.Describe(&n.HostNode, "Proxmox host running the VM.")
	an.Describe(&n.Role, "`controlplane` or `worker`.")
}

func init() {
	pulumi.RegisterOutputType(MapOutput[NodeInfo]{})
	pulumi.RegisterOutputType(MapOutput[HelmReleaseInfo]{})
	pulumi.RegisterOutputType(EtcdSnapshotInfoOutput{})
}
