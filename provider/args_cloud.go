package provider

import "github.com/pulumi/pulumi/sdk/v3/go/pulumi"

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

// ProxmoxStorageClass is a StorageClass of the Proxmox CSI plugin: volumes on one datastore.
type ProxmoxStorageClass struct {
	Name          string `pulumi:"name"`
	Storage       string `pulumi:"storage"`
	Default       *bool  `pulumi:"default,optional"`
	ReclaimPolicy string `pulumi:"reclaimPolicy,optional"`
	FsType        string `pulumi:"fsType,optional"`
}

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

// Flux bootstraps Flux: its controllers, and a GitRepository and Kustomization that sync the
// cluster from the user's repository.
type Flux struct {
	Version       string             `pulumi:"version,optional"`
	GitRepository FluxGitRepository  `pulumi:"gitRepository"`
	SshKey        pulumi.StringInput `pulumi:"sshKey,optional" provider:"secret"`
	SecretRef     string             `pulumi:"secretRef,optional"`
	KnownHosts    string             `pulumi:"knownHosts,optional"`
	KeyRotation   string             `pulumi:"keyRotation,optional"`
}

// FluxGitRepository is the repository Flux syncs the cluster from.
type FluxGitRepository struct {
	Url    string `pulumi:"url"`
	Branch string `pulumi:"branch,optional"`
	Path   string `pulumi:"path,optional"`
}
