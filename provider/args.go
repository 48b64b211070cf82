package provider

import "github.com/pulumi/pulumi/sdk/v3/go/pulumi"

// TalosProxmoxClusterArgs are the inputs of a TalosProxmoxCluster. Fields that decide the
// shape of the resource graph are plain values (known at preview, so preview shows real
// changes); values that only flow into child resources (config patches, manifest contents)
// accept outputs and secrets.
type TalosProxmoxClusterArgs struct {
	ClusterName                    string                  `pulumi:"clusterName"`
	TalosVersion                   string                  `pulumi:"talosVersion"`
	KubernetesVersion              string                  `pulumi:"kubernetesVersion,optional"`
	ConfigContract                 string                  `pulumi:"configContract,optional"`
	Endpoint                       string                  `pulumi:"endpoint,optional"`
	Vip                            string                  `pulumi:"vip,optional"`
	Nodes                          map[string]Node         `pulumi:"nodes"`
	NodeDefaults                   *NodeDefaults           `pulumi:"nodeDefaults,optional"`
	Network                        *Network                `pulumi:"network,optional"`
	Image                          *Image                  `pulumi:"image,optional"`
	AllowSchedulingOnControlPlanes *bool                   `pulumi:"allowSchedulingOnControlPlanes,optional"`
	ProxmoxClusterName             string                  `pulumi:"proxmoxClusterName,optional"`
	VmIdRange                      *VmIdRange              `pulumi:"vmIdRange,optional"`
	ConfigPatches                  pulumi.StringArrayInput `pulumi:"configPatches,optional"`
	ControlPlaneConfigPatches      pulumi.StringArrayInput `pulumi:"controlPlaneConfigPatches,optional"`
	WorkerConfigPatches            pulumi.StringArrayInput `pulumi:"workerConfigPatches,optional"`
	InlineManifests                []InlineManifest        `pulumi:"inlineManifests,optional"`
	ExtraManifests                 []string                `pulumi:"extraManifests,optional"`
	ExtraManifestNamespaces        map[string]string       `pulumi:"extraManifestNamespaces,optional"`
	Cilium                         *Cilium                 `pulumi:"cilium,optional"`
	NvidiaDevicePlugin             *NvidiaDevicePlugin     `pulumi:"nvidiaDevicePlugin,optional"`
	ProxmoxCsi                     *ProxmoxCsi             `pulumi:"proxmoxCsi,optional"`
	ProxmoxCcm                     *ProxmoxCcm             `pulumi:"proxmoxCcm,optional"`
	Flux                           *Flux                   `pulumi:"flux,optional"`
	HelmCharts                     []HelmChart             `pulumi:"helmCharts,optional"`
	Health                         *Health                 `pulumi:"health,optional"`
	Credentials                    *Credentials            `pulumi:"credentials,optional"`
	Upgrade                        *Upgrade                `pulumi:"upgrade,optional"`
	ManifestSync                   *ManifestSync           `pulumi:"manifestSync,optional"`
	EtcdBackup                     *EtcdBackup             `pulumi:"etcdBackup,optional"`
	Recovery                       *Recovery               `pulumi:"recovery,optional"`
	Secrets                        *Secrets                `pulumi:"secrets,optional"`
	AllowDataLoss                  *bool                   `pulumi:"allowDataLoss,optional"`
	DiskEncryption                 *DiskEncryption         `pulumi:"diskEncryption,optional"`
}

// Cilium installs Cilium from its Helm chart with the values Talos documents.
type Cilium struct {
	Version    string         `pulumi:"version,optional"`
	Repository string         `pulumi:"repository,optional"`
	Digest     string         `pulumi:"digest,optional"`
	Values     map[string]any `pulumi:"values,optional"`
	ValuesYaml string         `pulumi:"valuesYaml,optional"`
}

// NvidiaDevicePlugin installs NVIDIA's device plugin from its Helm chart for the GPU nodes: a
// chart preset with the same inputs as Cilium's.
type NvidiaDevicePlugin Cilium

// HelmChart is a Helm chart rendered into the control planes' inline manifests.
type HelmChart struct {
	Name        string         `pulumi:"name"`
	Chart       string         `pulumi:"chart"`
	Repository  string         `pulumi:"repository,optional"`
	Version     string         `pulumi:"version,optional"`
	Namespace   string         `pulumi:"namespace,optional"`
	Values      map[string]any `pulumi:"values,optional"`
	ValuesYaml  string         `pulumi:"valuesYaml,optional"`
	Digest      string         `pulumi:"digest,optional"`
	IncludeCrds *bool          `pulumi:"includeCrds,optional"`
}

// Node is one machine of the cluster.
type Node struct {
	HostNode       string                  `pulumi:"hostNode"`
	Role           string                  `pulumi:"role"`
	Ip             string                  `pulumi:"ip,optional"`
	Ip6            string                  `pulumi:"ip6,optional"`
	Mtu            *int                    `pulumi:"mtu,optional"`
	Networks       []NodeNetwork           `pulumi:"networks,optional"`
	MacAddress     string                  `pulumi:"macAddress,optional"`
	VmId           *int                    `pulumi:"vmId,optional"`
	Cpu            *int                    `pulumi:"cpu,optional"`
	MemoryMib      *int                    `pulumi:"memoryMib,optional"`
	DiskSizeGib    *int                    `pulumi:"diskSizeGib,optional"`
	DatastoreId    string                  `pulumi:"datastoreId,optional"`
	Bridge         string                  `pulumi:"bridge,optional"`
	VlanId         *int                    `pulumi:"vlanId,optional"`
	Tags           []string                `pulumi:"tags,optional"`
	DataDisks      []DataDisk              `pulumi:"dataDisks,optional"`
	PciDevices     []PciDevice             `pulumi:"pciDevices,optional"`
	Labels         map[string]string       `pulumi:"labels,optional"`
	Taints         []string                `pulumi:"taints,optional"`
	ConfigPatches  pulumi.StringArrayInput `pulumi:"configPatches,optional"`
	InstallDisk    string                  `pulumi:"installDisk,optional"`
	Image          *NodeImage              `pulumi:"image,optional"`
	Gpu            string                  `pulumi:"gpu,optional"`
	DiskEncryption *DiskEncryption         `pulumi:"diskEncryption,optional"`
}

// NodeImage is a node's own Talos image.
type NodeImage struct {
	Extensions []string `pulumi:"extensions,optional"`
	Schematic  string   `pulumi:"schematic,optional"`
	SecureBoot *bool    `pulumi:"secureBoot,optional"`
}

// DiskEncryption is how Talos encrypts a node's system volumes.
type DiskEncryption struct {
	State     string `pulumi:"state,optional"`
	Ephemeral string `pulumi:"ephemeral,optional"`
}

// VmIdRange bounds the default VM ids.
type VmIdRange struct {
	Start *int `pulumi:"start,optional"`
	End   *int `pulumi:"end,optional"`
}

func vmIDBound(r *VmIdRange, start bool) *int {
	switch {
	case r == nil:
		return nil
	case start:
		return r.Start
	default:
		return r.End
	}
}

// DataDisk is an extra virtual disk.
type DataDisk struct {
	SizeGib     int    `pulumi:"sizeGib"`
	DatastoreId string `pulumi:"datastoreId,optional"`
	MountPath   string `pulumi:"mountPath,optional"`
}

// PciDevice is a PCI device passed through from the Proxmox host.
type PciDevice struct {
	Mapping string `pulumi:"mapping,optional"`
	Id      string `pulumi:"id,optional"`
	Pcie    *bool  `pulumi:"pcie,optional"`
	Rombar  *bool  `pulumi:"rombar,optional"`
	Xvga    *bool  `pulumi:"xvga,optional"`
}

// InlineManifest is a Kubernetes manifest embedded in the control plane configuration.
type InlineManifest struct {
	Name     string             `pulumi:"name"`
	Contents pulumi.StringInput `pulumi:"contents"`
}
