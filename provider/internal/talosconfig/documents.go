package talosconfig

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// The component names each NIC's link "net<i>" after the VM's net<i> with a LinkAliasConfig
// (linkDocuments). Talos names links after the kernel (ens18, enp6s18…), which depends on the
// VM's PCI layout; an alias selected by MAC address (or, without a fixed MAC, the VM's only
// virtio link) does not.

// MultiDocument reports whether a configuration contract (a Talos minor, "v1.12") configures
// the network through its own documents (HostnameConfig, LinkConfig, Layer2VIPConfig…) rather
// than `.machine.network`, deprecated from Talos v1.12.
func MultiDocument(contract string) bool { return spec.MinorNumber(contract) >= 12 }

// documents are the network, time and volume documents of contract v1.12 and later, replacing
// `.machine.network`, `.machine.time` and `.machine.disks`.
func documents(c *spec.Cluster, n spec.Node, a Addresses) []map[string]any {
	doc := func(kind string, fields map[string]any) map[string]any {
		fields["apiVersion"], fields["kind"] = "v1alpha1", kind

		return fields
	}

	docs := []map[string]any{
		// "auto: off" replaces the generated "auto: stable": the node's name is its hostname.
		doc("HostnameConfig", map[string]any{"auto": "off", "hostname": n.Name}),
	}

	docs = append(docs, linkDocuments(c, n, a, doc)...)

	if len(c.Network.Nameservers) > 0 {
		var ns []any
		for _, s := range c.Network.Nameservers {
			ns = append(ns, map[string]any{"address": s})
		}

		docs = append(docs, doc("ResolverConfig", map[string]any{"nameservers": ns}))
	}

	if len(c.Network.NTPServers) > 0 {
		docs = append(docs, doc("TimeSyncConfig", map[string]any{"ntp": map[string]any{"servers": c.Network.NTPServers}}))
	}

	for _, v := range []struct{ name, key string }{{"STATE", n.DiskEncryption.State}, {"EPHEMERAL", n.DiskEncryption.Ephemeral}} {
		if v.key != "" {
			docs = append(docs, doc("VolumeConfig", map[string]any{
				"name": v.name, "encryption": encryptionSpec(v.key, v.name == "EPHEMERAL"),
			}))
		}
	}

	names := volumeNames(n)

	for i, d := range n.DataDisks {
		if d.MountPath == "" || d.MountPath != "/var/mnt/"+names[i] {
			continue // not mounted, or mounted elsewhere through machine.disks (NodePatch)
		}

		docs = append(docs, doc("UserVolumeConfig", map[string]any{
			"name": names[i],
			"provisioning": map[string]any{
				// By the udev link of its Proxmox serial: Talos reports no serial for a QEMU disk
				// behind virtio-scsi (siderolabs/talos#11348).
				"diskSelector": map[string]any{"match": fmt.Sprintf("%q in disk.symlinks", DataDiskDevice(d.Serial))},
				"minSize":      "1GiB",
				"grow":         true,
			},
		}))
	}

	return docs
}

var notVolumeName = regexp.MustCompile(`[^a-z0-9-]+`)

// VolumeName is the user volume a data disk mounted at /var/mnt/<name> becomes from contract
// v1.12 on: the last element of its mount path, as a volume name.
func VolumeName(mountPath string) string {
	name := strings.Trim(notVolumeName.ReplaceAllString(strings.ToLower(path.Base(mountPath)), "-"), "-")
	if name == "" {
		name = "data"
	}

	return name
}

// volumeNames are the user volume names of a node's mounted data disks, by disk index: their
// VolumeName, with "-2", "-3"… added when two mount paths end alike (/a/data, /b/data). A disk
// mounted right where Talos mounts its volume (/var/mnt/<name>) keeps its name first.
func volumeNames(n spec.Node) map[int]string {
	names, used := map[int]string{}, map[string]bool{}

	for pass := range 2 {
		for i, d := range n.DataDisks {
			base := VolumeName(d.MountPath)
			if d.MountPath == "" || names[i] != "" || (pass == 0) != (d.MountPath == "/var/mnt/"+base) {
				continue
			}

			name := base
			for k := 2; used[name]; k++ {
				name = fmt.Sprintf("%s-%d", base, k)
			}

			used[name], names[i] = true, name
		}
	}

	return names
}

// encryptionSpec is a system volume's LUKS2 encryption with one key in slot 0: sealed to the TPM
// (Talos refuses to enrol it unless the node booted with Secure Boot, not in setup mode, rather
// than seal it to a state an attacker could reproduce), or derived from the node's UUID. The
// EPHEMERAL volume's TPM key is also locked to STATE's salt (lockToState, from Talos v1.11, which
// Talos recommends for TPM keys of volumes other than STATE): a disk whose STATE was swapped
// does not open.
func encryptionSpec(key string, lockToState bool) map[string]any {
	k := map[string]any{"slot": 0}

	switch key {
	case spec.KeyTPM:
		k["tpm"] = map[string]any{"checkSecurebootStatusOnEnroll": true}
		if lockToState {
			k["lockToState"] = true
		}
	case spec.KeyNodeID:
		k["nodeID"] = map[string]any{}
	}

	return map[string]any{"provider": "luks2", "keys": []any{k}}
}
