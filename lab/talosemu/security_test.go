package talosemu_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// tpmEncryption seals STATE to the TPM (checking Secure Boot on enrolment) and derives
// EPHEMERAL's key from the node id, as the component's configuration contract v1.11 writes it.
const tpmEncryption = `machine:
  systemDiskEncryption:
    state:
      provider: luks2
      keys:
        - slot: 0
          tpm:
            checkSecurebootStatusOnEnroll: true
    ephemeral:
      provider: luks2
      keys:
        - slot: 0
          nodeID: {}
`

func TestSecureBootNodeReportsItsStateAndEncryptedVolumes(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{Security: talosemu.Security{SecureBoot: true, UKI: true, TPM: true}})

	// In maintenance mode already, as `talosctl get securitystate --insecure` shows.
	st, err := safe.StateGetByID[*runtime.SecurityState](nodeCtx(t, n), insecureClient(t, n).COSI, runtime.SecurityStateID)
	if err != nil || !st.TypedSpec().SecureBoot || !st.TypedSpec().BootedWithUKI {
		t.Fatalf("SecurityState in maintenance mode = %+v, %v", st, err)
	}

	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1", tpmEncryption))

	c := secureClient(t, n)

	for label, want := range map[string]string{"STATE": "tpm", "EPHEMERAL": "nodeID"} {
		vs, err := safe.StateGetByID[*block.VolumeStatus](nodeCtx(t, n), c.COSI, label)
		if err != nil {
			t.Fatalf("VolumeStatus %s: %v", label, err)
		}

		if vs.TypedSpec().EncryptionProvider != block.EncryptionProviderLUKS2 || !slices.Equal(vs.TypedSpec().ConfiguredEncryptionKeys, []string{want}) {
			t.Errorf("VolumeStatus %s: provider %v keys %v, want luks2 [%s]", label, vs.TypedSpec().EncryptionProvider, vs.TypedSpec().ConfiguredEncryptionKeys, want)
		}
	}
}

// A TPM key that cannot be enrolled stops the boot after the install: the API never comes back,
// whatever the firmware lacks (as Talos' TPM key handler refuses).
func TestTPMKeyTheMachineCannotSealNeverBoots(t *testing.T) {
	t.Parallel()

	for name, sec := range map[string]talosemu.Security{
		"no TPM":             {SecureBoot: true, UKI: true},
		"Secure Boot off":    {UKI: true, TPM: true},
		"setup mode":         {SecureBoot: true, SetupMode: true, UKI: true, TPM: true},
		"no UKI (BIOS boot)": {TPM: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			var (
				mu   sync.Mutex
				logs []string
			)

			opts := talosemu.Options{Security: sec, InstallDelay: -1, Address: nextHost(), Cluster: newCluster(t)}
			opts.Logf = func(f string, a ...any) {
				mu.Lock()
				defer mu.Unlock()

				logs = append(logs, f)
			}

			n, err := talosemu.Start(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}

			t.Cleanup(func() { n.Close() }) //nolint:errcheck // never fails

			cfg := machineConfig(t, machine.TypeControlPlane, "cp-1", tpmEncryption)
			if _, err := insecureClient(t, n).ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{
				Data: cfg, Mode: machineapi.ApplyConfigurationRequest_AUTO,
			}); err != nil {
				t.Fatalf("apply: %v", err)
			}

			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()

			if err := n.WaitState(ctx, talosemu.StateInstalled); err == nil {
				t.Fatalf("the node came up although its TPM key cannot be enrolled")
			}

			mu.Lock()
			defer mu.Unlock()

			if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, "boot failed") }) {
				t.Errorf("no boot failure logged: %v", logs)
			}
		})
	}
}

// Talos encrypts a system volume only when it creates it: encryption added to a running node's
// configuration stops its next boot (the plain volume is not LUKS), as Talos' volume controller does.
func TestEncryptionAddedLaterStopsTheBoot(t *testing.T) {
	t.Parallel()

	var (
		mu   sync.Mutex
		logs []string
	)

	opts := talosemu.Options{Security: talosemu.Security{SecureBoot: true, UKI: true, TPM: true}, Address: nextHost(), Cluster: newCluster(t)}
	opts.Logf = func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()

		logs = append(logs, fmt.Sprintf(f, a...))
	}

	n, err := talosemu.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { n.Close() }) //nolint:errcheck // never fails

	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	if _, err := apply(t, n, &machineapi.ApplyConfigurationRequest{
		Data: machineConfig(t, machine.TypeControlPlane, "cp-1", tpmEncryption), Mode: machineapi.ApplyConfigurationRequest_REBOOT,
	}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()

	if err := n.WaitState(ctx, talosemu.StateInstalled, talosemu.StateBootstrapped); err == nil {
		t.Fatal("the node booted with encryption added to its unencrypted volumes")
	}

	mu.Lock()
	defer mu.Unlock()

	if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, "block dev type mismatch: xfs != luks") }) {
		t.Errorf("no volume mismatch logged: %v", logs)
	}
}
