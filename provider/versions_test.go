package provider

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/errtest"
)

// TestConstructPerTalosMinor: each Talos minor gets the configuration contract it expects
// recorded in the secrets, and the documents of that contract.
func TestConstructPerTalosMinor(t *testing.T) {
	t.Parallel()

	for talos, want := range map[string]struct {
		contract string
		docs     []string
	}{
		"v1.11.5": {"v1.11", nil},
		"v1.12.4": {"v1.12", []string{"HostnameConfig", "LinkAliasConfig", "LinkConfig", "Layer2VIPConfig", "ResolverConfig", "TimeSyncConfig", "UserVolumeConfig"}},
		"v1.13.9": {"v1.13", []string{"HostnameConfig", "LinkConfig", "Layer2VIPConfig", "UserVolumeConfig"}},
		"v1.14.1": {"v1.14", []string{"HostnameConfig", "LinkConfig", "Layer2VIPConfig", "UserVolumeConfig", "UnattendedInstallConfig",
			"KubeNodeConfig", "KubeNetworkConfig", "KubeAPIServerConfig", "KubeInlineManifestConfig"}},
	} {
		r := &recorder{}
		// From contract v1.14 a data disk is mounted where Talos mounts user volumes.
		in := inputsFromJSON(t, strings.ReplaceAll(homelabJSON, "/var/lib/longhorn", "/var/mnt/longhorn")).
			Set("talosVersion", property.New(talos)).Delete("kubernetesVersion")
		if want.contract == "v1.14" {
			// The kubelet's settings are a document of their own from contract v1.14.
			in = in.Set("workerConfigPatches", property.New([]property.Value{
				property.New("apiVersion: v1alpha1\nkind: KubeletConfig\nextraArgs:\n  max-pods: \"200\"\n"),
			}))
		}

		if _, err := construct(t, r, "homelab", in); err != nil {
			t.Fatalf("talosVersion %s: %v", talos, err)
		}

		if got := r.named("homelab-secrets").Inputs.Get("talosVersion").AsString(); got != want.contract {
			t.Errorf("talosVersion %s: secrets keep contract %s, want %s", talos, got, want.contract)
		}

		kinds := map[string]bool{}
		for host, cfg := range nodeConfigs(t, r) {
			for _, d := range cfg.Documents() {
				kinds[d.Kind()] = true
			}

			if want.contract == "v1.11" && len(cfg.Documents()) != 1 {
				t.Errorf("talosVersion %s: %s has %d documents, want one", talos, host, len(cfg.Documents()))
			}
		}

		for _, k := range want.docs {
			if !kinds[k] {
				t.Errorf("talosVersion %s: no %s document on any node", talos, k)
			}
		}
	}
}

// TestRejectedPatchStopsBeforeAnyVM: a patch Talos rejects for the cluster's contract fails the
// construct with the patch named and what to write instead, and no VM is registered.
func TestRejectedPatchStopsBeforeAnyVM(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name, talos, patch string
		want               []string
	}{
		{"JSON patch, several documents", "v1.13.9", `[{"op": "add", "path": "/machine/sysctls", "value": {"a": "1"}}]`,
			[]string{"configPatches[1]", "strategic merge"}},
		{"hostname beside HostnameConfig", "v1.12.4", "machine:\n  network:\n    hostname: other\n",
			[]string{"configPatches[1]", "static hostname is already set", "remove machine.network.hostname"}},
		{"unknown field", "v1.11.5", "machine:\n  nosuchfield: 1\n", []string{"configPatches[1]"}},
	} {
		r := &recorder{}
		in := inputsFromJSON(t, homelabJSON).Set("talosVersion", property.New(tc.talos)).Delete("kubernetesVersion")
		in = in.Set("configPatches", property.New([]property.Value{in.Get("configPatches").AsArray().Get(0), property.New(tc.patch)}))

		_, err := construct(t, r, "homelab", in)
		if !errtest.Says(t, tc.name, err, tc.want...) {
			continue
		}

		if vms := r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine"); len(vms) != 0 {
			t.Errorf("%s: %d VMs registered before the configuration was found invalid", tc.name, len(vms))
		}
	}
}

// TestDataDiskOutsideVarMntOnContractV114: under contract v1.14 the kubelet has no bind mounts, so a
// data disk mounted elsewhere than /var/mnt/<name> is refused, naming it, before any VM.
func TestDataDiskOutsideVarMntOnContractV114(t *testing.T) {
	t.Parallel()

	r := &recorder{}

	_, err := construct(t, r, "homelab", inputsFromJSON(t, homelabJSON).Set("talosVersion", property.New("v1.14.1")).Delete("kubernetesVersion"))
	if err == nil || !strings.Contains(err.Error(), "nodes.worker-1.dataDisks[0].mountPath") || !strings.Contains(err.Error(), "/var/mnt/longhorn") {
		t.Fatalf("want the data disk's mount path refused: %v", err)
	}

	if vms := r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine"); len(vms) != 0 {
		t.Errorf("%d VMs registered", len(vms))
	}
}

// TestConfigContractInput: a cluster created on Talos v1.14 with configContract v1.13 gets the
// v1.13 documents (and may keep a data disk outside /var/mnt).
func TestConfigContractInput(t *testing.T) {
	t.Parallel()

	r := &recorder{}
	in := inputsFromJSON(t, homelabJSON).Set("talosVersion", property.New("v1.14.1")).Set("configContract", property.New("v1.13")).
		Delete("kubernetesVersion")

	if _, err := construct(t, r, "homelab", in); err != nil {
		t.Fatal(err)
	}

	if got := r.named("homelab-secrets").Inputs.Get("talosVersion").AsString(); got != "v1.13" {
		t.Errorf("the secrets keep contract %s, want v1.13", got)
	}

	for host, cfg := range nodeConfigs(t, r) {
		if cfg.UnattendedInstallConfig() != nil {
			t.Errorf("%s: an UnattendedInstallConfig under contract v1.13", host)
		}
	}
}
