package talosemu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config"
	configconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/extensions"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
)

// Security is what the VM's firmware made of the boot image (the host decides it from the VM's
// configuration and the image, hostemu's firmware): what Talos reports as its SecurityState and
// what its disk encryption can seal keys to.
type Security struct {
	// SecureBoot: the firmware enforces Secure Boot with Talos' keys enrolled.
	SecureBoot bool
	// SetupMode: the firmware holds no platform key (its keys were never enrolled).
	SetupMode bool
	// UKI: the node booted a unified kernel image (a Secure Boot image through systemd-boot),
	// whose signed PCR policy a TPM key is sealed to.
	UKI bool
	// TPM: the VM has a TPM 2.0.
	TPM bool
}

// publishSecurityLocked is the node's SecurityState (`talosctl get securitystate`).
func (n *Node) publishSecurityLocked() {
	s := runtime.NewSecurityStateSpec(runtime.NamespaceName)
	s.TypedSpec().SecureBoot = n.opts.Security.SecureBoot
	s.TypedSpec().BootedWithUKI = n.opts.Security.UKI
	put(n.resources, s)
}

// systemVolumeStatusLocked is the VolumeStatus of a system volume (STATE, EPHEMERAL) as Talos
// reports it once mounted: LUKS2 and its keys when the configuration encrypts it.
func (n *Node) systemVolumeStatusLocked(label, location, mount string, size uint64) *block.VolumeStatus {
	vs := block.NewVolumeStatus(block.NamespaceName, label)
	vs.TypedSpec().Phase = block.VolumePhaseReady
	vs.TypedSpec().Location = location
	vs.TypedSpec().MountLocation = mount
	vs.TypedSpec().SetSize(size)

	// Encrypted or not as the install created it; an encrypted volume's key slots follow the
	// configuration (Talos syncs them), an unencrypted one stays so.
	var enc configconfig.EncryptionConfig
	if n.formatted != nil && volumeEncryption(n.formatted.cfg, label) != nil {
		if enc = volumeEncryption(n.active.cfg, label); enc == nil {
			enc = volumeEncryption(n.formatted.cfg, label)
		}
	}

	if enc != nil {
		vs.TypedSpec().EncryptionProvider = enc.Provider()

		// One entry per key type, sorted, as Talos' volume controller lists them.
		for _, k := range enc.Keys() {
			if kind := keyKind(k); !slices.Contains(vs.TypedSpec().ConfiguredEncryptionKeys, kind) {
				vs.TypedSpec().ConfiguredEncryptionKeys = append(vs.TypedSpec().ConfiguredEncryptionKeys, kind)
			}

			vs.TypedSpec().EncryptionLockedToState = vs.TypedSpec().EncryptionLockedToState || k.LockToSTATE()
		}

		slices.Sort(vs.TypedSpec().ConfiguredEncryptionKeys)
	}

	return vs
}

// volumeEncryption is a system volume's encryption in cfg: its VolumeConfig document's, else
// machine.systemDiskEncryption's (Talos refuses a configuration with both); nil when none.
func volumeEncryption(cfg config.Provider, label string) configconfig.EncryptionConfig {
	if v, ok := cfg.Volumes().ByName(label); ok && v.Encryption() != nil {
		return v.Encryption()
	}

	if m := cfg.Machine(); m != nil {
		if e := m.SystemDiskEncryption().Get(label); e != nil {
			return e
		}
	}

	return nil
}

// keyKind is a key's type as Talos' VolumeStatus names it (block.EncryptionKeyType: "static",
// "nodeID", "kms", "tpm").
func keyKind(k configconfig.EncryptionKey) string {
	switch {
	case k.TPM() != nil:
		return block.EncryptionKeyTPM.String()
	case k.NodeID() != nil:
		return block.EncryptionKeyNodeID.String()
	case k.KMS() != nil:
		return block.EncryptionKeyKMS.String()
	}

	return block.EncryptionKeyStatic.String()
}

// provisionFailure is why Talos cannot open its system volumes at boot with cfg on this machine
// ("" when it can), as its TPM key handler refuses (internal/pkg/encryption/keys/tpm2.go): a TPM
// key needs a TPM, a unified kernel image's signed PCR policy, and, with
// checkSecurebootStatusOnEnroll, Secure Boot on and out of setup mode. Talos then stops its boot
// sequence with the error on the console: the API never comes up.
func (n *Node) provisionFailure(cfg config.Provider) string {
	sec := n.opts.Security

	for _, label := range []string{constants.StatePartitionLabel, constants.EphemeralPartitionLabel} {
		enc := volumeEncryption(cfg, label)

		// Formatted otherwise than the configuration says: Talos' volume controller refuses to open
		// a plain filesystem as LUKS, and mounts no LUKS volume as a filesystem; a LUKS volume
		// opens only with a key type it was formatted with (key slots are added from there).
		if n.formatted != nil {
			was := volumeEncryption(n.formatted.cfg, label)

			switch {
			case was == nil && enc != nil:
				return fmt.Sprintf("%s: block dev type mismatch: xfs != luks (the volume was created unencrypted)", label)
			case was != nil && enc == nil:
				return fmt.Sprintf("%s: the volume is LUKS-encrypted, the configuration mounts it as a plain filesystem", label)
			case was != nil && !sharesKeyType(was, enc):
				return fmt.Sprintf("%s: no configured key opens the encrypted volume (formatted with other key types)", label)
			}
		}

		if enc == nil {
			continue
		}

		for _, k := range enc.Keys() {
			tpm := k.TPM()
			if tpm == nil {
				continue
			}

			switch {
			case !sec.TPM:
				return fmt.Sprintf("%s: failed to enroll the TPM2 key: no TPM 2.0 device", label)
			case tpm.CheckSecurebootOnEnroll() && !sec.SecureBoot:
				return fmt.Sprintf("%s: failed to enroll the TPM2 key, as SecureBoot is disabled (and checkSecurebootOnEnroll is enabled)", label)
			case tpm.CheckSecurebootOnEnroll() && sec.SetupMode:
				return fmt.Sprintf("%s: failed to enroll the TPM2 key, as the system is in SecureBoot setup mode (and checkSecurebootOnEnroll is enabled)", label)
			case !sec.UKI:
				return fmt.Sprintf("%s: failed to seal the TPM2 key: the boot has no UKI PCR signature", label)
			}
		}
	}

	return ""
}

// publishExtensionsLocked is `talosctl get extensions` of a factory image: the Image Factory
// schematic as the "schematic" extension (id 0, its version the schematic id), then each official
// extension of the schematic the node runs (ids 1, 2, …; the factory's names), stale ids removed.
func (n *Node) publishExtensionsLocked() {
	var exts []extensions.Metadata

	if n.schematic != "" {
		exts = append(exts, extensions.Metadata{
			Name: "schematic", Version: n.schematic, Author: "Image Factory", Description: "This extension holds the schematic id of the image.",
		})

		if n.opts.Extensions != nil {
			for _, e := range n.opts.Extensions(n.schematic) {
				exts = append(exts, extensions.Metadata{Name: e[strings.LastIndex(e, "/")+1:], Version: "lab", Author: "Sidero Labs"})
			}
		}
	}

	for i := range max(len(exts), n.publishedExtensions) {
		ext := runtime.NewExtensionStatus(runtime.NamespaceName, strconv.Itoa(i))
		if i < len(exts) {
			ext.TypedSpec().Metadata = exts[i]
			put(n.resources, ext)
		} else {
			remove(n.resources, ext.Metadata())
		}
	}

	n.publishedExtensions = len(exts)
}

// sharesKeyType tells whether b has a key of a type a has.
func sharesKeyType(a, b configconfig.EncryptionConfig) bool {
	for _, x := range a.Keys() {
		for _, y := range b.Keys() {
			if keyKind(x) == keyKind(y) {
				return true
			}
		}
	}

	return false
}
