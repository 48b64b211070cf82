package provider

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/await"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/wire"
)

// specInput converts the component's arguments into the plain input the pure core validates,
// and the pass-through of values that stay Pulumi inputs. Patches and manifest contents that
// are already known (secret or not) are resolved so they can be checked before anything is
// registered; unknown ones are passed through unchecked.
func specInput(ctx *pulumi.Context, a *TalosProxmoxClusterArgs) (spec.Input, wire.PassThrough, error) {
	pass := wire.PassThrough{
		ConfigPatches:             a.ConfigPatches,
		ControlPlaneConfigPatches: a.ControlPlaneConfigPatches,
		WorkerConfigPatches:       a.WorkerConfigPatches,
		NodeConfigPatches:         map[string]pulumi.StringArrayInput{},
	}

	in, err := plainInput(ctx, a, &pass)

	return in, pass, err
}

func plainInput(ctx *pulumi.Context, a *TalosProxmoxClusterArgs, pass *wire.PassThrough) (spec.Input, error) {
	in := spec.Input{
		ClusterName:                    a.ClusterName,
		TalosVersion:                   a.TalosVersion,
		KubernetesVersion:              a.KubernetesVersion,
		ConfigContract:                 a.ConfigContract,
		Endpoint:                       a.Endpoint,
		VIP:                            a.Vip,
		AllowSchedulingOnControlPlanes: a.AllowSchedulingOnControlPlanes,
		ProxmoxClusterName:             a.ProxmoxClusterName,
		VMIDStart:                      vmIDBound(a.VmIdRange, true),
		VMIDEnd:                        vmIDBound(a.VmIdRange, false),
		ExtraManifests:                 a.ExtraManifests,
		ExtraManifestNamespaces:        a.ExtraManifestNamespaces,
		Nodes:                          map[string]spec.NodeInput{},
	}

	var err error
	if in.ConfigPatches, err = resolvePatches(ctx, a.ConfigPatches); err != nil {
		return in, fmt.Errorf("configPatches: %w", err)
	}

	if in.ControlPlaneConfigPatches, err = resolvePatches(ctx, a.ControlPlaneConfigPatches); err != nil {
		return in, fmt.Errorf("controlPlaneConfigPatches: %w", err)
	}

	if in.WorkerConfigPatches, err = resolvePatches(ctx, a.WorkerConfigPatches); err != nil {
		return in, fmt.Errorf("workerConfigPatches: %w", err)
	}

	if d := a.NodeDefaults; d != nil {
		in.NodeDefaults = spec.NodeDefaultsInput{
			CPU: d.Cpu, MemoryMiB: d.MemoryMib, DiskSizeGiB: d.DiskSizeGib, DatastoreID: d.DatastoreId,
			Bridge: d.Bridge, CPUType: d.CpuType, VMMachine: d.VmMachine, BIOS: d.Bios,
			SCSIHardware: d.ScsiHardware, Tags: d.Tags, Taints: d.Taints, MTU: d.Mtu, Networks: nodeNetworks(d.Networks),
		}
	}

	if n := a.Network; n != nil {
		in.Network = spec.NetworkInput{
			Gateway: n.Gateway, PrefixLength: n.PrefixLength, Nameservers: n.Nameservers,
			NTPServers: n.NtpServers, Bridge: n.Bridge, VLANID: n.VlanId, DHCP: n.Dhcp,
			PodSubnets: n.PodSubnets, ServiceSubnets: n.ServiceSubnets, DNSDomain: n.DnsDomain,
			Gateway6: n.Gateway6, PrefixLength6: n.PrefixLength6,
		}
	}

	if i := a.Image; i != nil {
		in.Image = spec.ImageInput{
			FactoryURL: i.FactoryUrl, Extensions: i.Extensions, Schematic: i.Schematic, Platform: i.Platform,
			Arch: i.Arch, DatastoreID: i.DatastoreId, SharedDatastore: i.SharedDatastore, ContentType: i.ContentType,
			SecureBoot: i.SecureBoot,
		}
	}

	for name, n := range a.Nodes {
		node := spec.NodeInput{
			HostNode: n.HostNode, Role: n.Role, IP: n.Ip, MACAddress: n.MacAddress, VMID: n.VmId, CPU: n.Cpu,
			MemoryMiB: n.MemoryMib, DiskSizeGiB: n.DiskSizeGib, DatastoreID: n.DatastoreId, Bridge: n.Bridge,
			VLANID: n.VlanId, Tags: n.Tags, Labels: n.Labels, Taints: n.Taints, InstallDisk: n.InstallDisk,
			IP6: n.Ip6, MTU: n.Mtu, Networks: nodeNetworks(n.Networks),
		}

		node.GPU = n.Gpu

		if i := n.Image; i != nil {
			node.Image = &spec.NodeImageInput{Extensions: i.Extensions, Schematic: i.Schematic, SecureBoot: i.SecureBoot}
		}

		node.DiskEncryption = diskEncryption(n.DiskEncryption)

		for _, d := range n.DataDisks {
			node.DataDisks = append(node.DataDisks, spec.DataDiskInput{SizeGiB: d.SizeGib, DatastoreID: d.DatastoreId, MountPath: d.MountPath})
		}

		for _, d := range n.PciDevices {
			node.PCIDevices = append(node.PCIDevices, spec.PCIDeviceInput{Mapping: d.Mapping, ID: d.Id, PCIe: d.Pcie, ROMBar: d.Rombar, XVGA: d.Xvga})
		}

		if node.ConfigPatches, err = resolvePatches(ctx, n.ConfigPatches); err != nil {
			return in, fmt.Errorf("nodes.%s.configPatches: %w", name, err)
		}

		if n.ConfigPatches != nil {
			pass.NodeConfigPatches[name] = n.ConfigPatches
		}

		in.Nodes[name] = node
	}

	for i, m := range a.InlineManifests {
		pass.ManifestContents = append(pass.ManifestContents, m.Contents)

		contents := spec.KnownPatch("") // missing contents: reported as holding no object
		if m.Contents != nil {
			s, known, err := await.Known[string](ctx.Context(), m.Contents.ToStringOutput())
			if err != nil {
				return in, fmt.Errorf("inlineManifests[%d].contents: %w", i, err)
			}

			contents = spec.Patch{}
			if known {
				contents = spec.KnownPatch(s)
			}
		}

		in.InlineManifests = append(in.InlineManifests, spec.InlineManifestInput{Name: m.Name, Contents: contents})
	}

	in.Cilium = chartPreset(a.Cilium)
	in.NvidiaDevicePlugin = chartPreset((*Cilium)(a.NvidiaDevicePlugin))
	in.ProxmoxCSI, in.ProxmoxCCM = proxmoxCloud(a.ProxmoxCsi, a.ProxmoxCcm)

	if cr := a.Credentials; cr != nil {
		in.Credentials = spec.CredentialsInput{Validity: cr.Validity, RenewBefore: cr.RenewBefore}
	}

	if h := a.Health; h != nil {
		in.Health = spec.HealthInput{Timeout: h.Timeout, RequireNodesReady: h.RequireNodesReady}
	}

	if u := a.Upgrade; u != nil {
		in.Upgrade = spec.UpgradeInput{
			Drain: u.Drain, DrainTimeout: u.DrainTimeout, Timeout: u.Timeout, MaxParallel: u.MaxParallel, AllowDowngrade: u.AllowDowngrade,
		}
	}

	if m := a.ManifestSync; m != nil {
		in.ManifestSync = spec.ManifestSyncInput{Enabled: m.Enabled, PruneCrdsAndNamespaces: m.PruneCrdsAndNamespaces, Force: m.Force, Timeout: m.Timeout}
	}

	if b := a.EtcdBackup; b != nil {
		in.EtcdBackup = &spec.EtcdBackupInput{
			Destination: b.Destination, Keep: b.Keep, AgeRecipients: b.AgeRecipients, Required: b.Required,
			SnapshotNow: b.SnapshotNow, Schedule: b.Schedule, ScheduleSecret: b.ScheduleSecret,
		}
	}

	if r := a.Recovery; r != nil {
		in.Recovery = &spec.RecoveryInput{FromSnapshot: r.FromSnapshot}
		pass.AgeIdentity = r.AgeIdentity

		if in.Recovery.AgeIdentity, err = secretInput(ctx, "recovery.ageIdentity", r.AgeIdentity); err != nil {
			return in, err
		}
	}

	if sec := a.Secrets; sec != nil {
		in.Secrets = &spec.SecretsInput{}
		pass.SecretsBundle = sec.Bundle

		if in.Secrets.Bundle, err = secretInput(ctx, "secrets.bundle", sec.Bundle); err != nil {
			return in, err
		}

		// The SDKs make only top-level inputs secret by themselves; a plain bundle would be
		// kept in plain text with the component's inputs in the state.
		if sec.Bundle != nil && in.Secrets.Bundle.Known && !pulumi.IsSecret(sec.Bundle.ToStringOutput()) {
			_ = ctx.Log.Warn("secrets.bundle is not a secret, so the stack's state keeps it in plain text with the "+
				"component's inputs: pass it as one (`pulumi config set --secret`, pulumi.secret(…), pulumi.ToSecret)", nil)
		}
	}

	in.AllowDataLoss = a.AllowDataLoss != nil && *a.AllowDataLoss
	in.DiskEncryption = diskEncryption(a.DiskEncryption)

	if f := a.Flux; f != nil {
		in.Flux = &spec.FluxInput{
			Version: f.Version, URL: f.GitRepository.Url, Branch: f.GitRepository.Branch, Path: f.GitRepository.Path,
			SSHKey: f.SshKey != nil, SecretRef: f.SecretRef, KnownHosts: f.KnownHosts, KeyRotation: f.KeyRotation,
		}
		pass.FluxSSHKey = f.SshKey
	}

	for _, h := range a.HelmCharts {
		in.HelmCharts = append(in.HelmCharts, spec.HelmChartInput{
			Name: h.Name, Chart: h.Chart, Repository: h.Repository, Version: h.Version, Namespace: h.Namespace,
			Digest: h.Digest, Values: h.Values, ValuesYAML: h.ValuesYaml, IncludeCRDs: h.IncludeCrds,
		})
	}

	return in, nil
}

// resolvePatches reads patches that are already known. An unknown list is one unknown patch.
func resolvePatches(ctx *pulumi.Context, patches pulumi.StringArrayInput) ([]spec.Patch, error) {
	if patches == nil {
		return nil, nil
	}

	texts, known, err := await.Known[[]string](ctx.Context(), patches.ToStringArrayOutput())
	if err != nil {
		return nil, err
	}

	if !known {
		return []spec.Patch{{}}, nil
	}

	out := make([]spec.Patch, 0, len(texts))

	for _, t := range texts {
		out = append(out, spec.KnownPatch(t))
	}

	return out, nil
}

// secretInput is a secret string input's value for the checks (its text, known or not yet: an
// output of another resource at preview); an unset input is known and empty.
func secretInput(ctx *pulumi.Context, path string, v pulumi.StringInput) (spec.Patch, error) {
	if v == nil {
		return spec.KnownPatch(""), nil
	}

	s, known, err := await.Known[string](ctx.Context(), v.ToStringOutput())
	if err != nil {
		return spec.Patch{}, fmt.Errorf("%s: %w", path, err)
	}

	return spec.Patch{Text: s, Known: known}, nil
}

// nodeNetworks converts a node's (or nodeDefaults') networks; nil stays nil ("use the default").
func nodeNetworks(in []NodeNetwork) []spec.NetworkDeviceInput {
	if in == nil {
		return nil
	}

	out := make([]spec.NetworkDeviceInput, 0, len(in))

	for _, n := range in {
		d := spec.NetworkDeviceInput{
			Bridge: n.Bridge, VLANID: n.VlanId, MTU: n.Mtu, MACAddress: n.MacAddress, Addresses: n.Addresses,
			DHCP: n.Dhcp, Gateway: n.Gateway, Routes: n.Routes, ClusterNetwork: n.ClusterNetwork,
		}
		if b := n.Bond; b != nil {
			d.Bond = &spec.BondInput{Mode: b.Mode, Interfaces: b.Interfaces, MTU: b.Mtu}
		}

		out = append(out, d)
	}

	return out
}

func diskEncryption(d *DiskEncryption) *spec.DiskEncryptionInput {
	if d == nil {
		return nil
	}

	return &spec.DiskEncryptionInput{State: d.State, Ephemeral: d.Ephemeral}
}

// chartPreset is the input of a chart the component presets (cilium, nvidiaDevicePlugin); nil when
// it is not set.
func chartPreset(c *Cilium) *spec.ChartPresetInput {
	if c == nil {
		return nil
	}

	return &spec.ChartPresetInput{Version: c.Version, Repository: c.Repository, Digest: c.Digest, Values: c.Values, ValuesYAML: c.ValuesYaml}
}

// proxmoxCloud is the input of the Proxmox CSI plugin and CCM; nil for what is not set.
func proxmoxCloud(csi *ProxmoxCsi, ccm *ProxmoxCcm) (*spec.ProxmoxCSIInput, *spec.ProxmoxCCMInput) {
	var (
		sc *spec.ProxmoxCSIInput
		cc *spec.ProxmoxCCMInput
	)

	if csi != nil {
		sc = &spec.ProxmoxCSIInput{TokenRotation: csi.TokenRotation, Chart: spec.ChartPresetInput{
			Version: csi.Version, Repository: csi.Repository, Digest: csi.Digest, Values: csi.Values, ValuesYAML: csi.ValuesYaml,
		}}

		for _, c := range csi.StorageClasses {
			sc.StorageClasses = append(sc.StorageClasses, spec.StorageClassInput{
				Name: c.Name, Storage: c.Storage, Default: c.Default, ReclaimPolicy: c.ReclaimPolicy, FSType: c.FsType,
			})
		}
	}

	if ccm != nil {
		cc = &spec.ProxmoxCCMInput{TokenRotation: ccm.TokenRotation, Chart: spec.ChartPresetInput{
			Version: ccm.Version, Repository: ccm.Repository, Digest: ccm.Digest, Values: ccm.Values, ValuesYAML: ccm.ValuesYaml,
		}}
	}

	return sc, cc
}
