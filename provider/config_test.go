package provider

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// TestConfigCheckOfNewAndRunningClusters: the configuration check before any VM uses placeholder
// secrets for a new cluster, so its VMs do not wait for the talos provider to generate the
// cluster's secrets; a cluster with a VM in Proxmox is checked with its own secrets (whose
// contract may be older than the one asked for now), so its VMs depend on them. Either way the
// configurations applied are made from the cluster's own secrets, never the placeholder's.
func TestConfigCheckOfNewAndRunningClusters(t *testing.T) {
	t.Parallel()

	ownVM := map[string]any{"vmId": 113, "name": "cp-3", "nodeName": "pve1", "tags": []string{"controlplane", "homelab", "talos"}}
	otherVM := map[string]any{"vmId": 500, "name": "nas", "nodeName": "pve3", "tags": []string{"storage"}}

	for _, tc := range []struct {
		name string
		vms  []map[string]any
		wait bool
	}{
		{"new cluster", nil, false},
		{"new cluster beside someone else's VM", []map[string]any{otherVM}, false},
		{"running cluster", []map[string]any{otherVM, ownVM}, true},
		// A provider that answers nothing (unknown configuration at preview) is not a new cluster:
		// the cluster's own secrets and contract are used.
		{"inventory that answers nothing", nil, true},
	} {
		inv := labInventory()
		inv.VMs = tc.vms

		if tc.name == "inventory that answers nothing" {
			inv = &mockInventory{}
		}
		r := &recorder{proxmox: inv}

		if _, err := construct(t, r, "homelab", inputsFromJSON(t, homelabJSON)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}

		secrets := urnOf(r, "homelab-secrets")

		vms := r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine")
		if len(vms) == 0 {
			t.Fatalf("%s: no VM registered", tc.name)
		}

		for _, vm := range vms {
			if waits := slices.Contains(vm.Dependencies, secrets); waits != tc.wait {
				t.Errorf("%s: VM %s waits for the secrets: %v, want %v (dependencies %v)", tc.name, vm.Name, waits, tc.wait, vm.Dependencies)
			}
		}

		want := mockMachineSecrets().AsMap().Get("certs").AsMap().Get("os").AsMap().Get("cert").AsString()
		for host, cfg := range nodeConfigs(t, r) {
			if got := base64.StdEncoding.EncodeToString(cfg.Machine().Security().IssuingCA().Crt); got != want {
				t.Errorf("%s: %s is applied a configuration with another Talos API CA than the cluster's own", tc.name, host)
			}
		}
	}
}

// TestRejectedPatchOfARunningClusterStopsBeforeAnyVM: with its own secrets, a running cluster's
// check still fails the construct, naming the patch, before any VM (a new node's) is registered.
func TestRejectedPatchOfARunningClusterStopsBeforeAnyVM(t *testing.T) {
	t.Parallel()

	inv := labInventory()
	inv.VMs = []map[string]any{{"vmId": 113, "name": "cp-3", "nodeName": "pve1", "tags": []string{"controlplane", "homelab", "talos"}}}
	r := &recorder{proxmox: inv}

	in := inputsFromJSON(t, homelabJSON)
	in = in.Set("configPatches", property.New([]property.Value{in.Get("configPatches").AsArray().Get(0), property.New("machine:\n  nosuchfield: 1\n")}))

	_, err := construct(t, r, "homelab", in)
	if err == nil || !strings.Contains(err.Error(), "configPatches[1]") {
		t.Fatalf("want the patch refused, naming it: %v", err)
	}

	if vms := r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine"); len(vms) != 0 {
		t.Errorf("%d VMs registered before the configuration was found invalid", len(vms))
	}
}
