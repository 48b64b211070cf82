//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// secureBootProgram is a Talos v1.14 cluster booted with Secure Boot whose system volumes are
// sealed to the TPM, except worker-2: no Secure Boot, its volumes encrypted with node-ID keys.
func secureBootProgram(l *lab.Lab) string {
	return fmt.Sprintf(`name: vault
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  vault:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: vault
      talosVersion: v1.14.1
      network:
        gateway: %[1]s
      image:
        factoryUrl: ${factoryUrl}
        secureBoot: true
      diskEncryption: {state: tpm, ephemeral: tpm}
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[2]s}
        worker-1: {hostNode: pve2, role: worker, ip: %[3]s}
        worker-2: {hostNode: pve2, role: worker, ip: %[4]s, image: {secureBoot: false}, diskEncryption: {state: nodeID, ephemeral: nodeID}}
outputs:
  kubeconfig: ${vault.kubeconfig}
  talosconfig: ${vault.talosconfig}
  schematicId: ${vault.schematicId}
`, l.Address(1), l.Address(11), l.Address(21), l.Address(22))
}

// TestSecureBootAndTPMEncryptedCluster: Secure Boot VMs get OVMF with an EFI disk in setup mode
// and a TPM 2.0, boot the factory's Secure Boot image (one download per host and kind), report
// Secure Boot on, and run configurations whose VolumeConfig documents seal STATE and EPHEMERAL to
// the TPM (the emulated node refuses to boot otherwise); the node without Secure Boot has neither,
// and node-ID keys. The preview after is clean. A node image with an extension the Image Factory
// does not publish for the Talos version is refused at preview.
//
// Turning Secure Boot and TPM encryption on for worker-2 replaces its VM (previewed as a
// replacement, with the reason), and only its VM. Changing the only control plane's encryption is
// refused at preview: its replacement would lose etcd. A Talos upgrade installs the Secure Boot
// installer (a plain one would not boot under Secure Boot).
func TestSecureBootAndTPMEncryptedCluster(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 67}, secureBootProgram)

	mustRun(t, p, "up", "--yes", "--skip-preview")

	secure := map[string]bool{"cp-1": true, "worker-1": true, "worker-2": false}
	wantSecureVMs(t, l, secure)
	wantSecurityState(t, p, l, secure)

	schematic := strings.TrimSpace(mustRun(t, p, "stack", "output", "schematicId"))
	wantImageFiles(t, l, map[string][]string{
		"pve1": {schematic[:16] + "-nocloud-amd64-secureboot."},
		"pve2": {schematic[:16] + "-nocloud-amd64-secureboot.", schematic[:16] + "-nocloud-amd64.qcow2"},
	})

	mustRun(t, p, "preview", "--expect-no-changes")

	// An extension the factory does not publish for v1.14.1 (its image would not build) is refused
	// at preview, naming the property.
	l.Factory.Unpublish("v1.14.1", "siderolabs/zfs")
	editProgram(t, e, "worker-1: {hostNode: pve2, role: worker, ip: "+l.Address(21)+"}",
		"worker-1: {hostNode: pve2, role: worker, ip: "+l.Address(21)+", image: {extensions: [siderolabs/qemu-guest-agent, siderolabs/zfs]}}")

	if out, err := p.Run(t.Context(), "preview"); err == nil ||
		!strings.Contains(out, `nodes.worker-1.image.extensions[1]: "siderolabs/zfs" is not an official extension of Talos v1.14.1`) {
		t.Errorf("an extension v1.14.1 lacks was not refused at preview (%v):\n%s", err, out)
	}

	editProgram(t, e, ", image: {extensions: [siderolabs/qemu-guest-agent, siderolabs/zfs]}}", "}")

	// worker-2 turns Secure Boot and the cluster's TPM encryption on: a new VM, only for it.
	boots := bootIDs(t, l)

	editProgram(t, e, ", image: {secureBoot: false}, diskEncryption: {state: nodeID, ephemeral: nodeID}}", "}")

	preview := mustRun(t, p, "preview")
	if !strings.Contains(preview, "node worker-2: its VM is replaced: its Secure Boot or disk encryption changes from "+
		"STATE encrypted with nodeID, EPHEMERAL encrypted with nodeID to Secure Boot, STATE encrypted with tpm, EPHEMERAL encrypted with tpm") {
		t.Errorf("the preview does not say why worker-2's VM is replaced:\n%s", preview)
	}

	vmType := "proxmoxve:VM/virtualMachine:VirtualMachine"
	if got := previewChanges(t, p, vmType)[vmType]; !slices.Contains(got, "replace vault-worker-2") ||
		slices.ContainsFunc(got, func(s string) bool { return !strings.HasSuffix(s, " vault-worker-2") }) {
		t.Errorf("the preview changes the VMs %v, want worker-2's replaced and no other", got)
	}

	mustRun(t, p, "up", "--yes", "--skip-preview")

	secure["worker-2"] = true
	wantSecureVMs(t, l, secure)
	wantSecurityState(t, p, l, secure)

	for name, id := range bootIDs(t, l) {
		if changed := id != boots[name]; changed != (name == "worker-2") {
			t.Errorf("%s's boot id changed: %v (only worker-2's VM is new)", name, changed)
		}
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	// The only control plane's EPHEMERAL key changes: a replacement, which would lose etcd.
	editProgram(t, e, "diskEncryption: {state: tpm, ephemeral: tpm}", "diskEncryption: {state: tpm, ephemeral: nodeID}")

	out, err := p.Run(t.Context(), "preview")
	if err == nil || !strings.Contains(out, "replaces control plane cp-1 (its Secure Boot or disk encryption changes from") ||
		!strings.Contains(out, "allowDataLoss: true") {
		t.Errorf("the preview of the only control plane's new encryption was not refused for etcd's data (%v):\n%s", err, out)
	}

	editProgram(t, e, "diskEncryption: {state: tpm, ephemeral: nodeID}", "diskEncryption: {state: tpm, ephemeral: tpm}")

	// A Talos upgrade installs the Secure Boot installer: every node boots v1.14.2 with Secure Boot.
	setTalosVersion(t, e, "v1.14.1", "v1.14.2")
	mustRun(t, p, "up", "--yes", "--skip-preview")

	for name, n := range labNodes(t, l) {
		if r := n.Running(); r.Version != "v1.14.2" {
			t.Errorf("%s runs %s after the upgrade, want v1.14.2", name, r.Version)
		}
	}

	wantSecurityState(t, p, l, secure)
	mustRun(t, p, "preview", "--expect-no-changes")
}

// wantSecureVMs checks each node's VM: a Secure Boot node's has OVMF, an EFI disk without
// pre-enrolled keys and a TPM 2.0 state disk, and the talos-secureboot tag; another's none of them.
func wantSecureVMs(t *testing.T, l *lab.Lab, secure map[string]bool) {
	t.Helper()

	for _, v := range l.PVE.VMs() {
		sb, ok := secure[v.Name]
		if !ok {
			continue
		}

		c := v.Config
		tags := strings.Split(c["tags"], ";")
		has := c["bios"] == "ovmf" && c["efidisk0"] != "" && !strings.Contains(c["efidisk0"], "pre-enrolled-keys=1") &&
			strings.Contains(c["tpmstate0"], "version=v2.0") && slices.Contains(tags, "talos-secureboot")
		none := c["tpmstate0"] == "" && !slices.Contains(tags, "talos-secureboot")

		if (sb && !has) || (!sb && !none) {
			t.Errorf("%s's VM (Secure Boot %v): bios %q efidisk0 %q tpmstate0 %q tags %q", v.Name, sb, c["bios"], c["efidisk0"], c["tpmstate0"], c["tags"])
		}
	}
}

// wantSecurityState reads each node's SecurityState and system volumes through its Talos API (the
// stack's talosconfig): Secure Boot on and both volumes sealed to the TPM where declared, else
// Secure Boot off and node-ID keys; the running configuration carries the VolumeConfig documents.
func wantSecurityState(t *testing.T, p *lab.Pulumi, l *lab.Lab, secure map[string]bool) {
	t.Helper()

	addrs := map[string]string{"cp-1": l.Address(11), "worker-1": l.Address(21), "worker-2": l.Address(22)}

	c := stackTalosClient(t, p, addrs["cp-1"])
	defer c.Close() //nolint:errcheck

	for name, sb := range secure {
		ctx := client.WithNode(t.Context(), addrs[name])

		st, err := safe.StateGetByID[*runtime.SecurityState](ctx, c.COSI, runtime.SecurityStateID)
		if err != nil {
			t.Fatalf("%s: SecurityState: %v", name, err)
		}

		if st.TypedSpec().SecureBoot != sb {
			t.Errorf("%s: Secure Boot %v, want %v", name, st.TypedSpec().SecureBoot, sb)
		}

		key := "nodeID"
		if sb {
			key = "tpm"
		}

		for _, label := range []string{"STATE", "EPHEMERAL"} {
			vs, err := safe.StateGetByID[*block.VolumeStatus](ctx, c.COSI, label)
			if err != nil {
				t.Fatalf("%s: VolumeStatus %s: %v", name, label, err)
			}

			if vs.TypedSpec().EncryptionProvider != block.EncryptionProviderLUKS2 || !slices.Equal(vs.TypedSpec().ConfiguredEncryptionKeys, []string{key}) {
				t.Errorf("%s: %s encryption %v keys %v, want luks2 [%s]", name, label, vs.TypedSpec().EncryptionProvider, vs.TypedSpec().ConfiguredEncryptionKeys, key)
			}
		}

		if running := runningConfig(t, c, addrs[name]); !strings.Contains(running, "kind: VolumeConfig\nname: EPHEMERAL") {
			t.Errorf("%s: the running configuration has no EPHEMERAL VolumeConfig:\n%s", name, running)
		}
	}
}
