package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Disk encryption keys: what a Talos system volume's LUKS2 key is sealed to.
const (
	// KeyTPM seals a random key to the node's TPM, bound to its Secure Boot state (PCR 7) and to
	// the signed PCR policy of the unified kernel image it booted: the disk opens only in this VM,
	// booted with Secure Boot.
	KeyTPM = "tpm"
	// KeyNodeID derives the key from the node's UUID and the volume label: it protects a disk taken
	// away from its VM, not one read with the VM's configuration.
	KeyNodeID = "nodeID"
)

// SecureBootMinor is the first Talos minor whose disk images enrol their Secure Boot keys
// themselves (systemd-boot's `secure-boot-enroll if-safe`, in a VM whose firmware is in setup
// mode). Before it only Talos' ISO enrols them, and the component boots nodes from disk images.
const SecureBootMinor = 14

// DiskEncryption is how a node's system volumes are encrypted: a key (KeyTPM, KeyNodeID) per
// volume, "" for none.
type DiskEncryption struct {
	State     string
	Ephemeral string
}

// On tells whether a volume is encrypted.
func (e DiskEncryption) On() bool { return e.State != "" || e.Ephemeral != "" }

// UsesTPM tells whether a volume's key is sealed to the TPM.
func (e DiskEncryption) UsesTPM() bool { return e.State == KeyTPM || e.Ephemeral == KeyTPM }

// Security tags: a VM's tags say how it boots and how its node's disk is encrypted, because
// neither can change on a running node (Talos installs a Secure Boot node anew, and encrypts STATE
// and EPHEMERAL only when it creates them). A VM whose tags differ from its node's declaration is
// replaced; Proxmox' inventory, which lists every VM's tags, shows that at preview.
const (
	SecureBootTag     = "talos-secureboot"
	encryptedTagStart = "talos-luks-"
)

// SecurityTags are the tags of node n's VM for its image's Secure Boot and its disk encryption:
// talos-secureboot, talos-luks-state-<key>, talos-luks-ephemeral-<key> (key in lower case, as
// Proxmox stores tags).
func (c *Cluster) SecurityTags(n Node) []string {
	var tags []string
	if c.ImageOf(n).SecureBoot {
		tags = append(tags, SecureBootTag)
	}

	if k := n.DiskEncryption.State; k != "" {
		tags = append(tags, encryptedTagStart+"state-"+strings.ToLower(k))
	}

	if k := n.DiskEncryption.Ephemeral; k != "" {
		tags = append(tags, encryptedTagStart+"ephemeral-"+strings.ToLower(k))
	}

	return tags
}

// IsSecurityTag tells a security tag (SecurityTags) from others.
func IsSecurityTag(t string) bool {
	return t == SecureBootTag || strings.HasPrefix(t, encryptedTagStart)
}

// SecurityOf describes security tags for a person: "Secure Boot, STATE encrypted with tpm", or
// "no Secure Boot nor disk encryption".
func SecurityOf(tags []string) string {
	var parts []string

	// Secure Boot first, then STATE, then EPHEMERAL (tags sort the other way).
	tags = slices.Clone(tags)
	slices.SortFunc(tags, func(a, b string) int { return securityRank(a) - securityRank(b) })

	for _, t := range tags {
		switch {
		case t == SecureBootTag:
			parts = append(parts, "Secure Boot")
		case strings.HasPrefix(t, encryptedTagStart):
			volume, key, _ := strings.Cut(strings.TrimPrefix(t, encryptedTagStart), "-")
			if key == "nodeid" {
				key = KeyNodeID
			}

			parts = append(parts, fmt.Sprintf("%s encrypted with %s", strings.ToUpper(volume), key))
		}
	}

	if len(parts) == 0 {
		return "no Secure Boot nor disk encryption"
	}

	return strings.Join(parts, ", ")
}

func securityRank(tag string) int {
	switch {
	case tag == SecureBootTag:
		return 0
	case strings.HasPrefix(tag, encryptedTagStart+"state-"):
		return 1
	}

	return 2
}

// checkSecureBootVersion refuses Secure Boot (at path) on a Talos version whose disk images do not
// enrol their keys.
func checkSecureBootVersion(p *problems, path, talosVersion string) {
	if talosVersion == "" || MinorNumber(talosVersion) >= SecureBootMinor {
		return
	}

	p.errorf(path, "Talos %s's disk images do not enrol their Secure Boot keys (from v1.%d they do, in a VM whose EFI disk is in setup "+
		"mode; before, only Talos' ISO does, and the component boots nodes from disk images); use talosVersion v1.%d or later, "+
		"or remove secureBoot", talosVersion, SecureBootMinor, SecureBootMinor)
}

// buildDiskEncryption checks a diskEncryption input at path; zero for nil.
func buildDiskEncryption(p *problems, path string, in *DiskEncryptionInput) DiskEncryption {
	if in == nil {
		return DiskEncryption{}
	}

	// A node's empty diskEncryption opts out of the cluster's; the cluster's must say something.
	if in.State == "" && in.Ephemeral == "" {
		if path == "diskEncryption" {
			p.errorf(path, "is empty; set state and/or ephemeral to %q or %q, or remove it", KeyTPM, KeyNodeID)
		}

		return DiskEncryption{}
	}

	e, bad := DiskEncryption{State: in.State, Ephemeral: in.Ephemeral}, false

	for _, f := range []struct{ field, key string }{{"state", in.State}, {"ephemeral", in.Ephemeral}} {
		switch f.key {
		case "", KeyTPM, KeyNodeID:
		default:
			hint := ""
			if strings.EqualFold(f.key, KeyNodeID) || strings.EqualFold(f.key, KeyTPM) {
				hint = " (the names are case-sensitive)"
			}

			p.errorf(path+"."+f.field, "%q is not a disk encryption key%s; use %q (sealed to the VM's TPM and its Secure Boot state) "+
				"or %q (derived from the node's UUID: protects a disk taken away from its VM only)", f.key, hint, KeyTPM, KeyNodeID)

			bad = true
		}
	}

	if bad {
		return DiskEncryption{}
	}

	return e
}

// buildSecurity gives node n its disk encryption (its own, else the cluster's) and the firmware
// Secure Boot needs, and reports what cannot work on it: a TPM key without Secure Boot (Talos seals
// it to the Secure Boot state of a UKI boot, and only Secure Boot VMs get a TPM), Secure Boot on
// BIOS firmware.
func buildSecurity(p *problems, path string, in NodeInput, all Input, n *Node, c *Cluster) {
	n.DiskEncryption = c.DiskEncryption
	own := in.DiskEncryption != nil

	if own {
		n.DiskEncryption = buildDiskEncryption(p, path+".diskEncryption", in.DiskEncryption)
	}

	secure := c.ImageOf(*n).SecureBoot
	if secure && all.NodeDefaults.BIOS == "" {
		n.BIOS = "ovmf" // Secure Boot's firmware; an explicit seabios is refused (checkSecurity)
	}

	if !secure && n.DiskEncryption.UsesTPM() && own {
		fix := fmt.Sprintf("set %s.image.secureBoot (or image.secureBoot) to true", path)
		if in.Image != nil && in.Image.SecureBoot != nil {
			fix = fmt.Sprintf("set %s.image.secureBoot to true (it is false)", path)
		}

		p.errorf(path+".diskEncryption", "uses %q, but the node does not boot with Secure Boot: Talos seals a TPM key to the Secure "+
			"Boot state of a signed kernel image, and only Secure Boot VMs get a TPM; %s, or use %q", KeyTPM, fix, KeyNodeID)
	}
}

// checkSecurity reports the cluster-wide conflicts of Secure Boot and disk encryption, once each
// and naming the nodes: Secure Boot with nodeDefaults.bios seabios, and the cluster's TPM disk
// encryption on nodes without Secure Boot.
func checkSecurity(p *problems, in Input, c *Cluster) {
	var seabios, noTPM []string

	for _, n := range c.Nodes {
		if c.ImageOf(n).SecureBoot && n.BIOS == "seabios" {
			seabios = append(seabios, n.Name)
		}

		own := in.Nodes[n.Name].DiskEncryption != nil
		if !own && n.DiskEncryption.UsesTPM() && !c.ImageOf(n).SecureBoot {
			noTPM = append(noTPM, n.Name)
		}
	}

	if len(seabios) > 0 {
		p.errorf("nodeDefaults.bios", "is \"seabios\", but Secure Boot needs UEFI firmware (nodes %s boot with Secure Boot); use "+
			"\"ovmf\", or leave bios unset: Secure Boot nodes then get it", strings.Join(seabios, ", "))
	}

	// Proxmox gives Secure Boot its SMM-protected OVMF (keys out of the guest's reach) only on q35
	// machines, and has no Secure Boot firmware for arm64 VMs.
	if secure := slices.ContainsFunc(c.Nodes, func(n Node) bool { return c.ImageOf(n).SecureBoot }); secure {
		if len(c.Nodes) > 0 && !strings.Contains(c.Nodes[0].VMMachine, "q35") {
			p.errorf("nodeDefaults.vmMachine", "is %q, but Secure Boot needs a q35 machine (Proxmox gives only q35 VMs the OVMF build "+
				"that keeps the Secure Boot keys out of the guest's reach); use \"q35\"", c.Nodes[0].VMMachine)
		}

		if c.Image.Arch == "arm64" {
			p.errorf("image.arch", "is \"arm64\", but Proxmox has no Secure Boot firmware for arm64 VMs; use \"amd64\" or remove secureBoot")
		}
	}

	if len(noTPM) > 0 {
		field := "state"
		if c.DiskEncryption.State != KeyTPM {
			field = "ephemeral"
		}

		p.errorf("diskEncryption."+field, "uses %q, but nodes %s do not boot with Secure Boot: Talos seals a TPM key to the Secure "+
			"Boot state of a signed kernel image, and only Secure Boot VMs get a TPM; set image.secureBoot to true (or the nodes' "+
			"image.secureBoot), give those nodes their own diskEncryption, or use %q", KeyTPM, strings.Join(noTPM, ", "), KeyNodeID)
	}
}
