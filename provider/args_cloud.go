package provider

import "github.com/pulumi/pulumi-go-provider/infer"

// ProxmoxCsi installs the Proxmox CSI plugin: PersistentVolumes as disks on Proxmox datastores,
// attached to the node's VM, through a scoped API token the component creates.
type ProxmoxCsi struct {
	StorageClasses []ProxmoxStorageClass `pulumi:"storageClasses"`
	TokenRotation  string                `pulumi:"tokenRotation,optional"`
	Version        string                `pulumi:"version,optional"`
	Repository     string                `pulumi:"repository,optional"`
	Digest         string                `pulumi:"digest,optional"`
	Values         map[string]any        `pulumi:"values,optional"`
	ValuesYaml     string                `pulumi:"valuesYaml,optional"`
}

// Annotate documents the Proxmox CSI input.
func (c *ProxmoxCsi) Annotate(an infer.Annotator) { describeType(an, c) }

// ProxmoxStorageClass is a StorageClass of the Proxmox CSI plugin: volumes on one datastore.
type ProxmoxStorageClass struct {
	Name          string `pulumi:"name"`
	Storage       string `pulumi:"storage"`
	Default       *bool  `pulumi:"default,optional"`
	ReclaimPolicy string `pulumi:"reclaimPolicy,optional"`
	FsType        string `pulumi:"fsType,optional"`
}

// Annotate documents a Proxmox StorageClass.
func (s *ProxmoxStorageClass) Annotate(an infer.Annotator) { describeType(an, s) }

// ProxmoxCcm installs the Proxmox cloud controller manager, through a scoped API token the
// component creates.
type ProxmoxCcm struct {
	TokenRotation string         `pulumi:"tokenRotation,optional"`
	Version       string         `pulumi:"version,optional"`
	Repository    string         `pulumi:"repository,optional"`
	Digest        string         `pulumi:"digest,optional"`
	Values        map[string]any `pulumi:"values,optional"`
	ValuesYaml    string         `pulumi:"valuesYaml,optional"`
}

// Annotate documents the Proxmox CCM input.
func (c *ProxmoxCcm) Annotate(an infer.Annotator) { describeType(an, c) }
