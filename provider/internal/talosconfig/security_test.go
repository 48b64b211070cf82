package talosconfig

import (
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// secureBootCluster boots with Secure Boot and seals both system volumes to the TPM, except for a
// worker without Secure Boot whose volumes use node-ID keys, and one whose EPHEMERAL alone is
// encrypted.
func secureBootCluster() spec.Input {
	return spec.Input{
		ClusterName:    "vault",
		TalosVersion:   "v1.14.1",
		Network:        spec.NetworkInput{Gateway: "10.0.0.1"},
		Image:          spec.ImageInput{SecureBoot: new(true)},
		DiskEncryption: &spec.DiskEncryptionInput{State: spec.KeyTPM, Ephemeral: spec.KeyTPM},
		Nodes: map[string]spec.NodeInput{
			"cp-1": {HostNode: "pve1", Role: "controlplane", IP: "10.0.0.11"},
			"worker-1": {HostNode: "pve1", Role: "worker", IP: "10.0.0.21", Image: &spec.NodeImageInput{SecureBoot: new(false)},
				DiskEncryption: &spec.DiskEncryptionInput{State: spec.KeyNodeID, Ephemeral: spec.KeyNodeID}},
			"worker-2": {HostNode: "pve1", Role: "worker", IP: "10.0.0.22", DiskEncryption: &spec.DiskEncryptionInput{Ephemeral: spec.KeyTPM}},
		},
	}
}

// encryptionOf is the key kind ("tpm", "nodeID", "" unencrypted) Talos reads for a system volume,
// from machine.systemDiskEncryption (up to contract v1.11) or its VolumeConfig document, and
// whether the key is locked to STATE and checks Secure Boot on enrolment.
func encryptionOf(cfg config.Config, volume string) (key string, lockToState, checksSecureBoot bool) {
	enc := cfg.Machine().SystemDiskEncryption().Get(volume)
	if v, ok := cfg.Volumes().ByName(volume); ok && v.Encryption() != nil {
		enc = v.Encryption()
	}

	if enc == nil || len(enc.Keys()) != 1 || enc.Provider().String() != "luks2" {
		return "", false, false
	}

	k := enc.Keys()[0]

	switch {
	case k.TPM() != nil:
		return spec.KeyTPM, k.LockToSTATE(), k.TPM().CheckSecurebootOnEnroll()
	case k.NodeID() != nil:
		return spec.KeyNodeID, k.LockToSTATE(), false
	}

	return "?", false, false
}

func checkEncryption(t *testing.T, cfg config.Config, n spec.Node, at string) {
	t.Helper()

	for _, v := range []struct{ name, want string }{{"STATE", n.DiskEncryption.State}, {"EPHEMERAL", n.DiskEncryption.Ephemeral}} {
		key, locked, checks := encryptionOf(cfg, v.name)
		if key != v.want {
			t.Errorf("%s: %s encrypted with %q, want %q", at, v.name, key, v.want)
		}

		if key == spec.KeyTPM && !checks {
			t.Errorf("%s: %s's TPM key does not check Secure Boot on enrolment", at, v.name)
		}

		// lockToState exists from Talos v1.11's VolumeConfig (contract v1.12 here), for volumes
		// other than STATE.
		multi := strings.Contains(at, "@v1.1") && !strings.Contains(at, "@v1.11")
		if wantLock := key == spec.KeyTPM && v.name == "EPHEMERAL" && multi; locked != wantLock {
			t.Errorf("%s: %s lockToState = %v, want %v", at, v.name, locked, wantLock)
		}
	}
}
