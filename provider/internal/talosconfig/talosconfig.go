// Package talosconfig generates the Talos machine configuration patches the component applies
// to every node: network, VIP, hostname, NTP, installer, labels, data disk mounts, certificate
// SANs and, on control planes, bootstrap manifests. Up to configuration contract v1.11 the
// patches target the single v1alpha1 document; from v1.12 the network, time and data disks move
// to their own documents (documents.go). It imports no Pulumi package.
package talosconfig

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/etcdbackup"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// Addresses are the node addresses a patch needs. In DHCP mode they are only known once the
// VMs report them through the guest agent, so the caller resolves them first.
type Addresses struct {
	// NodeIP is the address of the node being configured.
	NodeIP string
	// ControlPlaneIPs are the addresses of every control plane, in node-name order.
	ControlPlaneIPs []string
	// Endpoint is the host of the Kubernetes API endpoint (VIP, user endpoint or first
	// control plane address).
	Endpoint string
}

// ClusterEndpoint is the Kubernetes API URL for an endpoint host.
func ClusterEndpoint(host string) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		host = "[" + host + "]"
	}

	return "https://" + host + ":6443"
}

// DataDiskDevice is the path under which a Proxmox SCSI disk with the given serial appears in
// the guest: udev links QEMU SCSI disks by vendor, model and serial.
func DataDiskDevice(serial string) string {
	return "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_" + serial
}

// CertSANs are the extra names on the Talos API and Kubernetes API server certificates: the
// endpoint, the VIP and every control plane address, de-duplicated in that order.
func CertSANs(c *spec.Cluster, a Addresses) []string {
	sans := []string{}
	for _, s := range append([]string{a.Endpoint, c.VIP}, a.ControlPlaneIPs...) {
		if s != "" && !slices.Contains(sans, s) {
			sans = append(sans, s)
		}
	}

	return sans
}

// NodePatch is the component's patch for one node, as YAML, for a configuration contract (the
// Talos minor the cluster was created with): up to v1.11 one v1alpha1 document; from v1.12 the
// v1alpha1 part without the deprecated network, time and disk fields, followed by the documents
// that replace them.
func NodePatch(c *spec.Cluster, n spec.Node, a Addresses, contract string) (string, error) {
	if KubeDocuments(contract) {
		return nodePatchKube(c, n, a)
	}

	multi := MultiDocument(contract)

	sans := CertSANs(c, a)

	network := map[string]any{
		"hostname":   n.Name,
		"interfaces": v1alpha1Interfaces(c, n, a),
	}
	if len(c.Network.Nameservers) > 0 {
		network["nameservers"] = c.Network.Nameservers
	}

	labels := nodeLabels(c, n)

	machine := map[string]any{
		"certSANs": sans,
		"network":  network,
		"install": map[string]any{
			"disk":  n.InstallDisk,
			"image": c.ImageOf(n).InstallerImage,
		},
		"nodeLabels": labels,
	}
	if len(n.Taints) > 0 {
		machine["nodeTaints"] = n.Taints
	}

	if n.GPU == spec.GPUNvidia {
		var modules []any
		for _, m := range spec.NvidiaKernelModules {
			modules = append(modules, map[string]any{"name": m})
		}

		machine["kernel"] = map[string]any{"modules": modules}
		machine["sysctls"] = spec.NvidiaSysctls
	}

	if len(c.Network.NTPServers) > 0 {
		machine["time"] = map[string]any{"servers": c.Network.NTPServers}
	}

	// Up to contract v1.11 the system volumes' encryption is machine.systemDiskEncryption; from
	// v1.12 VolumeConfig documents carry it (documents.go).
	if e := n.DiskEncryption; e.On() && !multi {
		enc := map[string]any{}
		if e.State != "" {
			enc["state"] = encryptionSpec(e.State, false)
		}

		if e.Ephemeral != "" {
			enc["ephemeral"] = encryptionSpec(e.Ephemeral, false)
		}

		machine["systemDiskEncryption"] = enc
	}

	if scheduledBackups(c, n) {
		machine["features"] = map[string]any{"kubernetesTalosAPIAccess": map[string]any{
			"enabled": true, "allowedRoles": []string{backupRole}, "allowedKubernetesNamespaces": []string{etcdbackup.BackupNamespace},
		}}
	}

	kubelet := map[string]any{}

	subnets := nodeSubnets(c, n)
	if len(subnets) > 0 {
		kubelet["nodeIP"] = map[string]any{"validSubnets": subnets}
	}

	var disks, mounts []any

	volumes := volumeNames(n)

	for i, d := range n.DataDisks {
		if d.MountPath == "" {
			continue
		}

		if multi && d.MountPath == "/var/mnt/"+volumes[i] {
			continue // a UserVolumeConfig document (documents.go); pods and the kubelet see it there
		}

		// Mounted on the host at its path (a user volume only mounts under /var/mnt, and a kubelet
		// bind mount alone would not show pods the disk), bind-mounted for the kubelet.
		disks = append(disks, map[string]any{
			"device":     DataDiskDevice(d.Serial),
			"partitions": []any{map[string]any{"mountpoint": d.MountPath}},
		})
		mounts = append(mounts, map[string]any{
			"destination": d.MountPath,
			"type":        "bind",
			"source":      d.MountPath,
			"options":     []string{"bind", "rshared", "rw"},
		})
	}

	if len(disks) > 0 {
		machine["disks"] = disks
	}

	if len(mounts) > 0 {
		kubelet["extraMounts"] = mounts
	}

	// Before v1.14 Talos registers a worker's kubelet without its nodeTaints, and its own node
	// apply cannot add them later (it writes a worker's Node with the kubelet's credentials, which
	// NodeRestriction forbids to change taints): the kubelet registers with them instead. From
	// v1.14 Talos puts the taints in registerWithTaints itself, by key, over these.
	if n.Role == spec.RoleWorker && len(n.Taints) > 0 {
		kubelet["extraConfig"] = map[string]any{"registerWithTaints": registerWithTaints(n.Taints)}
	}

	if args := kubeletArgs(c, n); len(args) > 0 {
		kubelet["extraArgs"] = args
	}

	if len(kubelet) > 0 {
		machine["kubelet"] = kubelet
	}

	clusterNetwork := map[string]any{
		"dnsDomain":      c.Network.DNSDomain,
		"podSubnets":     c.Network.PodSubnets,
		"serviceSubnets": c.Network.ServiceSubnets,
	}

	cluster := map[string]any{"network": clusterNetwork}

	if c.Cilium {
		// Cilium is the CNI and replaces kube-proxy (Talos' Cilium guide).
		clusterNetwork["cni"] = map[string]any{"name": "none"}
		cluster["proxy"] = map[string]any{"disabled": true}
	}

	if n.Role == spec.RoleControlPlane {
		cluster["apiServer"] = map[string]any{"certSANs": sans}
		cluster["allowSchedulingOnControlPlanes"] = c.AllowSchedulingOnControlPlanes

		// etcd advertises one address: the primary family's (IPv4 in a dual-stack cluster).
		if len(subnets) > 0 {
			cluster["etcd"] = map[string]any{"advertisedSubnets": subnets[:1]}
		}
	}

	if !multi {
		return marshal(map[string]any{"machine": machine, "cluster": cluster})
	}

	delete(machine, "network")
	delete(machine, "time")
	// machine.disks stays for data disks outside /var/mnt (see above): deprecated for
	// UserVolumeConfig, which cannot mount elsewhere.

	return joinDocuments(append([]map[string]any{{"machine": machine, "cluster": cluster}}, documents(c, n, a)...))
}

// backupRole is the Talos API role the talos-backup CronJob's Talos ServiceAccount holds.
const backupRole = "os:etcd:backup"

// scheduledBackups tells whether node n lets pods in kube-system take etcd snapshots through the
// Talos API (a Talos ServiceAccount with backupRole): on control planes, with etcdBackup.schedule.
// Talos refuses the feature in a worker's configuration.
func scheduledBackups(c *spec.Cluster, n spec.Node) bool {
	return n.Role == spec.RoleControlPlane && c.EtcdBackup != nil && c.EtcdBackup.Schedule != ""
}

// kubeletArgs are the kubelet's extra arguments: with an external cloud provider (the Proxmox
// CCM) the kubelet registers its Node uninitialized, for the CCM to finish, with the provider ID
// of the node's VM.
func kubeletArgs(c *spec.Cluster, n spec.Node) map[string]any {
	if !c.ExternalCloudProvider {
		return nil
	}

	args := map[string]any{"cloud-provider": "external"}
	if id := c.ProviderID(n); id != "" {
		args["provider-id"] = id
	}

	return args
}

// nodeLabels are the node's own labels and the topology labels (Proxmox cluster and host).
func nodeLabels(c *spec.Cluster, n spec.Node) map[string]string {
	labels := maps.Clone(n.Labels)
	if labels == nil {
		labels = map[string]string{}
	}

	labels["topology.kubernetes.io/region"] = c.ProxmoxClusterName
	labels["topology.kubernetes.io/zone"] = n.HostNode

	// The device plugin's DaemonSet selects GPU nodes by this label (no node-feature-discovery).
	if _, own := labels[spec.NvidiaGPULabel]; c.NvidiaDevicePlugin && n.GPU == spec.GPUNvidia && !own {
		labels[spec.NvidiaGPULabel] = "true"
	}

	return labels
}

// Manifest is a resolved inline manifest.
type Manifest struct {
	Name     string
	Contents string
}

// ManifestsPatch is the control plane patch that carries the bootstrap manifests, for a
// configuration contract (`cluster.inlineManifests` and `cluster.extraManifests` up to v1.13,
// KubeInlineManifestConfig and KubeExternalManifestConfig documents from v1.14). It must be
// identical on every control plane. It returns "" when there is nothing to add.
func ManifestsPatch(inline []Manifest, extra []string, contract string) (string, error) {
	if len(inline) == 0 && len(extra) == 0 {
		return "", nil
	}

	if KubeDocuments(contract) {
		return manifestDocuments(inline, extra)
	}

	cluster := map[string]any{}

	if len(inline) > 0 {
		var list []any
		for _, m := range inline {
			list = append(list, map[string]any{"name": m.Name, "contents": m.Contents})
		}
		cluster["inlineManifests"] = list
	}

	if len(extra) > 0 {
		cluster["extraManifests"] = extra
	}

	return marshal(map[string]any{"cluster": cluster})
}

// marshal writes YAML with sorted keys and two-space indents: byte-stable for equal input, so
// a second `pulumi up` sees no diff.
func marshal(v any) (string, error) {
	var b strings.Builder

	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)

	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("encoding patch: %w", err)
	}

	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("encoding patch: %w", err)
	}

	return b.String(), nil
}

// registerWithTaints are taints (Talos' form, key → "value:Effect" or "Effect") as the kubelet's
// registerWithTaints list, in key order.
func registerWithTaints(taints map[string]string) []any {
	var out []any

	for _, key := range slices.Sorted(maps.Keys(taints)) {
		value, effect, found := strings.Cut(taints[key], ":")
		if !found {
			value, effect = "", value
		}

		t := map[string]any{"key": key, "effect": effect}
		if value != "" {
			t["value"] = value
		}

		out = append(out, t)
	}

	return out
}
