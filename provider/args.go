package provider

import (
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

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
	HelmCharts                     []HelmChart             `pulumi:"helmCharts,optional"`
	Health                         *Health                 `pulumi:"health,optional"`
	Credentials                    *Credentials            `pulumi:"credentials,optional"`
	Upgrade                        *Upgrade                `pulumi:"upgrade,optional"`
	ManifestSync                   *ManifestSync           `pulumi:"manifestSync,optional"`
	EtcdBackup                     *EtcdBackup             `pulumi:"etcdBackup,optional"`
	Recovery                       *Recovery               `pulumi:"recovery,optional"`
	AllowDataLoss                  *bool                   `pulumi:"allowDataLoss,optional"`
}

// Annotate documents the inputs.
func (a *TalosProxmoxClusterArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.ClusterName, "Name of the Kubernetes cluster (a DNS label such as `homelab`). It names the Talos "+
		"cluster, tags every VM and prefixes the downloaded image, so two clusters never collide.")
	an.Describe(&a.TalosVersion, "Talos Linux release to install, e.g. `v1.13.9`. It selects the boot image and the "+
		"installer. Changing it (or the image's extensions or schematic) upgrades the running nodes in place, one "+
		"at a time, in the same `pulumi up`: control planes first, then workers (`upgrade.maxParallel` at a "+
		"time), each gated on etcd and Kubernetes health, drained, upgraded through the Talos API and checked "+
		"after its reboot; VMs are never replaced for it. `pulumi preview` shows an update on exactly the nodes "+
		"that will reboot. The machine configuration keeps the format of the version the cluster was created "+
		"with, and Kubernetes the version it runs (see `kubernetesVersion`). Supported: v1.10.0 to v1.14.x; each Talos "+
		"minor upgrades only from the minors Talos supports, and only to a minor that runs the cluster's Kubernetes "+
		"version (both checked at preview). See docs/operations.md.")
	an.Describe(&a.KubernetesVersion, "Kubernetes release to run, e.g. `v1.34.1`. Unset, a new cluster gets the release "+
		"its Talos minor ships by default (v1.33.5 for Talos v1.10, v1.34.1 for Talos v1.11, v1.35.0 for Talos v1.12, "+
		"v1.36.3 for Talos v1.13, v1.37.0 for Talos v1.14) and records it (its `<name>-kubernetes-version` resource), "+
		"and a running cluster keeps the release it runs: a `talosVersion` change never upgrades Kubernetes. A Talos "+
		"version that does not run that release is refused at preview, naming the way out (upgrade Kubernetes first). "+
		"Setting it to a newer release (one minor at a time) upgrades the running cluster in place after any OS "+
		"upgrade: Kubernetes' own pre-checks, then kube-apiserver, controller-manager and scheduler on each control "+
		"plane in turn, kube-proxy, then every kubelet; unsetting it later keeps the release last set (see "+
		"docs/operations.md).")
	an.Describe(&a.Endpoint, "Host name or IP address clients use to reach the Kubernetes API "+
		"(`https://<endpoint>:6443`). Default: `vip` when set, else the first control plane's address.")
	an.Describe(&a.Vip, "Optional shared virtual IP that Talos moves between healthy control planes (layer 2, "+
		"same subnet as the nodes), giving a highly available API endpoint without a load balancer. "+
		"It only answers once the cluster is bootstrapped; the component always talks to node addresses.")
	an.Describe(&a.Nodes, "The machines of the cluster, keyed by hostname (a DNS label). Each becomes one Proxmox "+
		"VM running Talos. The first control plane by name bootstraps etcd; that bootstrap is never repeated, "+
		"even if nodes are added or renamed later. Removing a node takes it out of the cluster safely before its VM "+
		"is deleted: a worker is drained and a control plane leaves etcd, in an order that keeps etcd's quorum "+
		"(checked at preview); then the node is reset and its Node deleted (see docs/operations.md).")
	an.Describe(&a.NodeDefaults, "Values applied to every node that does not set its own.")
	an.Describe(&a.Network, "How the nodes are addressed: static addresses through Proxmox cloud-init "+
		"(default) or DHCP, plus DNS, NTP and the Kubernetes pod and service networks.")
	an.Describe(&a.Image, "Which Talos image the Image Factory builds (system extensions or a full "+
		"schematic) and how Proxmox downloads it.")
	an.Describe(&a.AllowSchedulingOnControlPlanes, "Let ordinary workloads run on control plane nodes. "+
		"Default: true when the cluster has no worker (a single-node or control-plane-only cluster), else false.")
	an.Describe(&a.ConfigContract, "Format of the Talos machine configuration, as a Talos minor (`v1.10` … `v1.14`): "+
		"`v1.10`/`v1.11` one v1alpha1 document, `v1.12`/`v1.13` network, time and volumes in their own documents, `v1.14` "+
		"Kubernetes and the installer too (see docs/configuration.md, Talos versions). Default: the minor of "+
		"`talosVersion`. Read when the cluster is created and kept for its life (an OS upgrade never changes the "+
		"format); it may not be newer than `talosVersion`. Set `v1.13` on Talos v1.14 to keep data disks mounted "+
		"outside /var/mnt (e.g. /var/lib/longhorn), which contract v1.14 cannot express.")
	an.Describe(&a.ProxmoxClusterName, "Value of the `topology.kubernetes.io/region` label on every node "+
		"(the zone label is the node's Proxmox host). Default: `clusterName`.")
	an.Describe(&a.VmIdRange, "Where the VM ids of nodes without `vmId` come from. Default: 800000 to 899999. A node's id "+
		"is derived from the cluster and node names (the first free id from a hash of both), and a node whose VM exists "+
		"keeps its id, so a create that is retried after a failure reuses the same id and can never make a second VM.")
	an.Describe(&a.ConfigPatches, "Talos machine configuration patches (YAML strategic-merge or JSON patch) "+
		"applied to every node after the component's own settings. May be secrets.")
	an.Describe(&a.ControlPlaneConfigPatches, "Patches applied to control plane nodes, after `configPatches`.")
	an.Describe(&a.WorkerConfigPatches, "Patches applied to worker nodes, after `configPatches`.")
	an.Describe(&a.InlineManifests, "Kubernetes manifests embedded in the control plane configuration and "+
		"applied by Talos when the cluster bootstraps (e.g. a CiliumLoadBalancerIPPool). Later changes reach the "+
		"cluster through the manifest sync (see `manifestSync`).")
	an.Describe(&a.ExtraManifests, "URLs of Kubernetes manifests Talos downloads and applies at bootstrap. "+
		"An unreachable URL makes the bootstrap fail. The manifest sync fetches them too (at preview and `up`), "+
		"so they must also be reachable from where Pulumi runs.")
	an.Describe(&a.ExtraManifestNamespaces, "Namespaces for extra manifests written for `kubectl apply -n <namespace>`, "+
		"such as Argo CD's install.yaml: URL (one of `extraManifests`) → namespace. Talos applies extra manifests "+
		"without a namespace option, so their namespaced objects would land in `default` (siderolabs/talos#12113). "+
		"A URL listed here is therefore not handed to Talos: the manifest sync fetches it after bootstrap and applies "+
		"it with its namespaced objects that name none in that namespace (created when no manifest declares it). "+
		"Requires the manifest sync (`manifestSync.enabled`).")
	an.Describe(&a.Cilium, "Install Cilium as the CNI, replacing flannel and kube-proxy. Its Helm chart is "+
		"rendered by the component (no helm binary) with the Talos values and embedded in the control planes' "+
		"configuration, so the cluster boots with its network ready. Set `{}` for the defaults.")
	an.Describe(&a.HelmCharts, "Helm charts rendered by the component (like `helm template`, at preview) and "+
		"embedded in the control planes' configuration as inline manifests `helm-<name>`, after Cilium and "+
		"before `inlineManifests`. Talos applies them at bootstrap; a chart, version or values change after "+
		"bootstrap updates the control planes' configuration (no reboot) and reaches the cluster's objects through "+
		"the manifest sync (see `manifestSync`).")
	an.Describe(&a.Health, "The health gate after bootstrap and every change: its timeout and checks.")
	an.Describe(&a.Credentials, "Lifetime of the client certificates in the `talosconfig` and `kubeconfig` outputs, "+
		"which the component issues from the cluster's CAs. A `pulumi up` within `renewBefore` of their expiry issues "+
		"new ones (its preview shows the update) and the outputs change; see docs/security.md.")
	an.Describe(&a.Upgrade, "How running nodes are upgraded when `talosVersion` or the schematic changes.")
	an.Describe(&a.ManifestSync, "How changes to Cilium, `helmCharts`, `inlineManifests` and `extraManifests` reach "+
		"the running cluster (Talos itself applies them only at bootstrap).")
	an.Describe(&a.EtcdBackup, "etcd snapshots before every risky change, on demand and on a schedule (see "+
		"docs/operations.md, Backups and disaster recovery).")
	an.Describe(&a.Recovery, "Restore etcd from a snapshot when the cluster has none running.")
	an.Describe(&a.AllowDataLoss, "Accept a plan that leaves the cluster without its etcd data (replacing or removing "+
		"every control plane of a running cluster, e.g. the only one) with neither `etcdBackup` nor `recovery`. "+
		"Default: false: such a plan is refused at preview, naming the change.")
}

// Cilium installs Cilium from its Helm chart with the values Talos documents.
type Cilium struct {
	Version    string         `pulumi:"version,optional"`
	Repository string         `pulumi:"repository,optional"`
	Digest     string         `pulumi:"digest,optional"`
	Values     map[string]any `pulumi:"values,optional"`
	ValuesYaml string         `pulumi:"valuesYaml,optional"`
}

// Annotate documents the Cilium input.
func (c *Cilium) Annotate(an infer.Annotator) {
	an.Describe(c, "Cilium as the cluster's CNI and kube-proxy replacement, rendered from its Helm chart.")
	an.Describe(&c.Version, "Chart version. Default: `1.18.0`.")
	an.Describe(&c.Repository, "Chart repository (https:// with an index.yaml, or oci://). "+
		"Default: `https://helm.cilium.io`.")
	an.Describe(&c.Digest, "Optional `sha256:<hex>` of the chart archive; a different archive is refused.")
	an.Describe(&c.Values, "Chart values, deep-merged over the Talos preset (IPAM `kubernetes`, kube-proxy "+
		"replacement through KubePrism on localhost:7445, Talos' cgroup and capability settings, Hubble "+
		"certificates made by a CronJob, at most one operator replica per control plane) and over `valuesYaml`.")
	an.Describe(&c.ValuesYaml, "Chart values as YAML (a values.yaml file's contents), merged over the preset; "+
		"`values` win.")
}

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

// Annotate documents a Helm chart.
func (h *HelmChart) Annotate(an infer.Annotator) {
	an.Describe(h, "A Helm chart rendered by the component and applied by Talos at bootstrap.")
	an.Describe(&h.Name, "Release name (at most 53 lower-case letters, digits and '-'); the inline manifest "+
		"is named `helm-<name>`.")
	an.Describe(&h.Chart, "Chart name in `repository`; or, when `repository` is empty, a local chart directory "+
		"or .tgz (absolute, or relative to the program's directory).")
	an.Describe(&h.Repository, "Chart repository: https:// (classic, with an index.yaml) or oci://<registry>/<path>. "+
		"Empty: `chart` is a local path.")
	an.Describe(&h.Version, "Exact chart version, e.g. `3.13.0`. Required with `repository`.")
	an.Describe(&h.Namespace, "Namespace of the release; created first unless it is `default` or `kube-system`. "+
		"Default: `default`.")
	an.Describe(&h.Values, "Chart values, deep-merged over `valuesYaml`.")
	an.Describe(&h.ValuesYaml, "Chart values as YAML (a values.yaml file's contents).")
	an.Describe(&h.Digest, "Optional `sha256:<hex>` of the chart archive; a different archive is refused "+
		"(Helm itself does not check).")
	an.Describe(&h.IncludeCrds, "Render the chart's crds/ directory too. Default: true.")
}

// Node is one machine of the cluster.
type Node struct {
	HostNode      string                  `pulumi:"hostNode"`
	Role          string                  `pulumi:"role"`
	Ip            string                  `pulumi:"ip,optional"`
	MacAddress    string                  `pulumi:"macAddress,optional"`
	VmId          *int                    `pulumi:"vmId,optional"`
	Cpu           *int                    `pulumi:"cpu,optional"`
	MemoryMib     *int                    `pulumi:"memoryMib,optional"`
	DiskSizeGib   *int                    `pulumi:"diskSizeGib,optional"`
	DatastoreId   string                  `pulumi:"datastoreId,optional"`
	Bridge        string                  `pulumi:"bridge,optional"`
	VlanId        *int                    `pulumi:"vlanId,optional"`
	Tags          []string                `pulumi:"tags,optional"`
	DataDisks     []DataDisk              `pulumi:"dataDisks,optional"`
	PciDevices    []PciDevice             `pulumi:"pciDevices,optional"`
	Labels        map[string]string       `pulumi:"labels,optional"`
	ConfigPatches pulumi.StringArrayInput `pulumi:"configPatches,optional"`
	InstallDisk   string                  `pulumi:"installDisk,optional"`
}

// Annotate documents a node.
func (n *Node) Annotate(an infer.Annotator) {
	an.Describe(n, "One machine of the cluster: a Proxmox VM running Talos Linux.")
	an.Describe(&n.HostNode, "Proxmox host (node name as shown in the Proxmox UI, e.g. `pve1`) that runs the VM.")
	an.Describe(&n.Role, "`controlplane` (runs etcd and the Kubernetes API) or `worker` (runs workloads).")
	an.Describe(&n.Ip, "Static IPv4 address of the node, in the subnet of `network.gateway`. Given to the VM "+
		"through Proxmox cloud-init and to Talos. Required unless `network.dhcp` is true.")
	an.Describe(&n.MacAddress, "MAC address of the VM's NIC, e.g. `BC:24:11:00:00:01`. Talos then selects the "+
		"interface by this address. Default: chosen by Proxmox, and Talos uses the first physical NIC.")
	an.Describe(&n.VmId, "Proxmox VM id (100 to 999999999), unique in the Proxmox cluster. Default: a stable id "+
		"from `vmIdRange` (an existing VM of this node keeps its id).")
	an.Describe(&n.Cpu, "Number of CPU cores. Control planes need at least 2. Default: `nodeDefaults.cpu` (2).")
	an.Describe(&n.MemoryMib, "Memory in MiB. Control planes need at least 2048 (4096 recommended). "+
		"Default: `nodeDefaults.memoryMib` (4096).")
	an.Describe(&n.DiskSizeGib, "Size of the OS disk in GiB (at least 10). Default: `nodeDefaults.diskSizeGib` (20).")
	an.Describe(&n.DatastoreId, "Proxmox storage for the OS disk, the data disks and the cloud-init drive. "+
		"Default: `nodeDefaults.datastoreId` (`local-lvm`).")
	an.Describe(&n.Bridge, "Proxmox bridge of the NIC. Default: `nodeDefaults.bridge`, else `network.bridge` (`vmbr0`).")
	an.Describe(&n.VlanId, "VLAN tag of the NIC (1 to 4094). Default: `network.vlanId` (untagged).")
	an.Describe(&n.Tags, "Extra Proxmox tags. Every VM is also tagged `talos`, its role and the cluster name.")
	an.Describe(&n.DataDisks, "Extra disks. A disk with a `mountPath` is formatted and mounted by Talos and "+
		"bind-mounted into the kubelet with shared propagation (what Longhorn needs).")
	an.Describe(&n.PciDevices, "Host PCI devices (e.g. a GPU) passed through to the VM.")
	an.Describe(&n.Labels, "Extra Kubernetes node labels. The component sets `topology.kubernetes.io/region` "+
		"and `topology.kubernetes.io/zone` itself.")
	an.Describe(&n.ConfigPatches, "Talos machine configuration patches for this node only, applied last. May be secrets.")
	an.Describe(&n.InstallDisk, "Disk Talos installs itself to. Default: `/dev/sda` (the SCSI OS disk).")
}

// VmIdRange bounds the default VM ids.
type VmIdRange struct {
	Start *int `pulumi:"start,optional"`
	End   *int `pulumi:"end,optional"`
}

// Annotate documents the VM id range.
func (r *VmIdRange) Annotate(an infer.Annotator) {
	an.Describe(r, "An inclusive range of Proxmox VM ids.")
	an.Describe(&r.Start, "First id. Default: 800000.")
	an.Describe(&r.End, "Last id. Default: `start` + 99999.")
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

// Annotate documents a data disk.
func (d *DataDisk) Annotate(an infer.Annotator) {
	an.Describe(d, "An extra virtual disk of a node, identified inside the VM by a serial number.")
	an.Describe(&d.SizeGib, "Size in GiB.")
	an.Describe(&d.DatastoreId, "Proxmox storage for the disk. Default: the node's `datastoreId`.")
	an.Describe(&d.MountPath, "Where Talos mounts the disk, under /var (e.g. `/var/lib/longhorn`). Talos "+
		"formats it on first boot; the kubelet sees it through an rshared bind mount. Unset: the disk is "+
		"attached but left alone.")
}

// PciDevice is a PCI device passed through from the Proxmox host.
type PciDevice struct {
	Mapping string `pulumi:"mapping,optional"`
	Id      string `pulumi:"id,optional"`
	Pcie    *bool  `pulumi:"pcie,optional"`
	Rombar  *bool  `pulumi:"rombar,optional"`
	Xvga    *bool  `pulumi:"xvga,optional"`
}

// Annotate documents a PCI device.
func (d *PciDevice) Annotate(an infer.Annotator) {
	an.Describe(d, "A host PCI device passed through to the VM. Set exactly one of `mapping` and `id`.")
	an.Describe(&d.Mapping, "Name of a Proxmox resource mapping (Datacenter → Resource Mappings), e.g. `gpu`. "+
		"Works with API tokens; preferred.")
	an.Describe(&d.Id, "Host PCI address, e.g. `0000:01:00.0`. The proxmoxve provider only allows this when "+
		"logged in as root@pam with a password.")
	an.Describe(&d.Pcie, "Attach as PCI Express (needs the q35 machine type). Default: true on q35.")
	an.Describe(&d.Rombar, "Make the device's ROM visible to the VM. Default: true.")
	an.Describe(&d.Xvga, "Use the device as the VM's primary GPU. Default: false.")
}

// InlineManifest is a Kubernetes manifest embedded in the control plane configuration.
type InlineManifest struct {
	Name     string             `pulumi:"name"`
	Contents pulumi.StringInput `pulumi:"contents"`
}

// Annotate documents an inline manifest.
func (m *InlineManifest) Annotate(an infer.Annotator) {
	an.Describe(m, "A Kubernetes manifest Talos applies once, when the cluster bootstraps.")
	an.Describe(&m.Name, "Unique name Talos tracks the manifest by. Names starting with `helm-` are reserved.")
	an.Describe(&m.Contents, "One or more Kubernetes objects as YAML documents. May be a secret.")
}
