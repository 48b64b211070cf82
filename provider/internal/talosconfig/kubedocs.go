package talosconfig

import (
	"fmt"
	"regexp"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/etcdbackup"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// KubeDocuments reports whether a configuration contract configures Kubernetes through its own
// documents (KubeNodeConfig, KubeNetworkConfig, KubeAPIServerConfig…) and installs through
// UnattendedInstallConfig: from Talos v1.14, which rejects the old `cluster.*`,
// `machine.kubelet` and `machine.install` fields beside them.
func KubeDocuments(contract string) bool { return spec.MinorNumber(contract) >= 14 }

// nodePatchKube is NodePatch for contract v1.14 and later: the v1alpha1 part keeps only the
// certificate SANs and etcd's subnet; the installer, the Kubernetes node, network and API server
// settings, Cilium's replacements and the network, time and volume documents follow.
func nodePatchKube(c *spec.Cluster, n spec.Node, a Addresses) (string, error) {
	sans := CertSANs(c, a)
	subnets := nodeSubnets(c, n)

	v1 := map[string]any{"machine": map[string]any{"certSANs": sans}}
	if n.Role == spec.RoleControlPlane && len(subnets) > 0 {
		// etcd advertises one address: the primary family's (IPv4 in a dual-stack cluster).
		v1["cluster"] = map[string]any{"etcd": map[string]any{"advertisedSubnets": subnets[:1]}}
	}

	doc := func(kind string, fields map[string]any) map[string]any {
		fields["apiVersion"], fields["kind"] = "v1alpha1", kind

		return fields
	}

	docs := []map[string]any{v1, doc("UnattendedInstallConfig", map[string]any{
		"installer": map[string]any{"image": c.ImageOf(n).InstallerImage},
		"provisioning": map[string]any{"diskSelector": map[string]any{
			// A device path, or one of its udev links (/dev/disk/by-id/…).
			"match": fmt.Sprintf("disk.dev_path == %[1]q || %[1]q in disk.symlinks", n.InstallDisk),
		}},
	})}

	node := map[string]any{"labels": nodeLabels(c, n)}
	if len(subnets) > 0 {
		node["nodeIP"] = map[string]any{"validSubnets": subnets}
	}

	taints := map[string]any{}
	for k, v := range n.Taints {
		taints[k] = v
	}

	if n.Role == spec.RoleControlPlane && c.AllowSchedulingOnControlPlanes {
		taints["node-role.kubernetes.io/control-plane"] = map[string]any{"$patch": "delete"}
	}

	if len(taints) > 0 {
		node["taints"] = taints
	}

	docs = append(docs, doc("KubeNodeConfig", node), doc("KubeNetworkConfig", map[string]any{
		"dnsDomain": c.Network.DNSDomain, "podSubnets": c.Network.PodSubnets, "serviceSubnets": c.Network.ServiceSubnets,
	}))

	if args := kubeletArgs(c, n); len(args) > 0 {
		docs = append(docs, doc("KubeletConfig", map[string]any{"extraArgs": args}))
	}

	if n.Role == spec.RoleControlPlane {
		docs = append(docs, doc("KubeAPIServerConfig", map[string]any{"certExtraSANs": sans}))
	}

	if n.GPU == spec.GPUNvidia {
		// From v1.14 kernel modules and sysctls are documents (KernelModuleConfig, SysctlConfig).
		for _, m := range spec.NvidiaKernelModules {
			docs = append(docs, doc("KernelModuleConfig", map[string]any{"name": m}))
		}

		docs = append(docs, doc("SysctlConfig", map[string]any{"params": spec.NvidiaSysctls}))
	}

	if scheduledBackups(c, n) {
		docs = append(docs, doc("KubeTalosAPIAccessConfig", map[string]any{
			"allowedRoles": []string{backupRole}, "allowedKubernetesNamespaces": []string{etcdbackup.BackupNamespace},
		}))
	}

	if c.Cilium && n.Role == spec.RoleControlPlane {
		// Cilium is the CNI and replaces kube-proxy (Talos' Cilium guide); only control planes
		// carry the cluster-wide CNI and proxy documents.
		docs = append(docs, doc("KubeFlannelCNIConfig", map[string]any{"$patch": "delete"}),
			doc("KubeProxyConfig", map[string]any{"enabled": false}))
	}

	// The kubelet sees user volumes where Talos mounts them; there are no bind mounts any more.
	volumes := volumeNames(n)
	for i, d := range n.DataDisks {
		if d.MountPath != "" && d.MountPath != "/var/mnt/"+volumes[i] {
			return "", fmt.Errorf("nodes.%s.dataDisks[%d].mountPath: %s: from configuration contract v1.14 Talos mounts a data disk only at "+
				"/var/mnt/<name>, where pods and the kubelet see it (there are no kubelet bind mounts); use /var/mnt/%s, "+
				"or configContract v1.13", n.Name, i, d.MountPath, volumes[i])
		}
	}

	return joinDocuments(append(docs, documents(c, n, a)...))
}

// joinDocuments writes each document with marshal and joins them into one multi-document patch.
func joinDocuments(docs []map[string]any) (string, error) {
	var out string

	for i, d := range docs {
		y, err := marshal(d)
		if err != nil {
			return "", err
		}

		if i > 0 {
			out += "---\n"
		}

		out += y
	}

	return out, nil
}

// manifestDocuments are the bootstrap manifests as contract v1.14 documents, whose names Talos
// requires to be DNS-1123 subdomains.
func manifestDocuments(inline []Manifest, extra []string) (string, error) {
	var docs []map[string]any

	for i, m := range inline {
		if len(m.Name) > 253 || !dnsSubdomain.MatchString(m.Name) {
			return "", fmt.Errorf("inline manifest %q (inlineManifests, or a Helm release's helm-<name>, #%d): from configuration contract v1.14 "+
				"Talos needs a DNS-1123 subdomain as its name (lower-case letters, digits, '-' and '.'); rename it", m.Name, i)
		}

		docs = append(docs, map[string]any{"apiVersion": "v1alpha1", "kind": "KubeInlineManifestConfig", "name": m.Name, "manifest": m.Contents})
	}

	for i, u := range extra {
		docs = append(docs, map[string]any{"apiVersion": "v1alpha1", "kind": "KubeExternalManifestConfig", "name": fmt.Sprintf("extra-%d", i), "url": u})
	}

	return joinDocuments(docs)
}

var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
