package provider

import (
	"strings"
	"testing"
)

// Construct asks Proxmox (the proxmoxve provider's functions) about what the cluster names and
// reports, with the input problems and before registering anything, a host that is not a node, a
// datastore a host lacks or that cannot hold the content, a PCI mapping that does not exist and a
// pinned VM id someone else's VM holds; the cluster's own VM under that id is fine.
func TestConstructChecksTheInventory(t *testing.T) {
	t.Parallel()

	inv := labInventory()
	inv.Nodes = []string{"pve1", "pve3"}
	inv.Datastores = map[string][]string{"local": {"iso", "snippets"}, "local-lvm": {"images"}}
	inv.PCIMappings = []string{"nic"}
	inv.VMs = []map[string]any{
		{"vmId": 111, "name": "nas", "nodeName": "pve3", "tags": []string{"storage"}},
		{"vmId": 113, "name": "cp-3", "nodeName": "pve1", "tags": []string{"controlplane", "homelab", "talos"}},
	}

	r := &recorder{proxmox: inv}

	in := strings.Replace(homelabJSON, `"cp-3": {"hostNode": "pve1"`, `"cp-3": {"hostNode": "pve1", "memoryMib": 0`, 1)

	_, err := construct(t, r, "homelab", inputsFromJSON(t, in))
	if err == nil {
		t.Fatal("construct accepted a cluster Proxmox cannot serve")
	}

	msg := err.Error()
	for _, want := range []string{
		`nodes.cp-2.hostNode: "pve2" is not a node of this Proxmox cluster (nodes: pve1, pve3)`,
		`nodes.worker-2.hostNode: "pve2" is not a node`,
		`image.datastoreId: datastore "local" on pve1 cannot hold import content (it holds iso, snippets)`,
		`nodes.cp-1.vmId: 111 is taken by VM "nas" on pve3`,
		`nodes.cp-3.memoryMib:`, // an input problem, reported in the same error
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error has no %q:\n%s", want, msg)
		}
	}

	if strings.Contains(msg, "cp-3.vmId") {
		t.Errorf("the cluster's own VM under its pinned id is reported as taken:\n%s", msg)
	}

	if regs := r.custom(); len(regs) != 0 {
		t.Errorf("%d resources were registered before the error", len(regs))
	}

	// The mapping is checked when its host exists.
	inv = labInventory()
	inv.PCIMappings = []string{"nic"}

	_, err = construct(t, &recorder{proxmox: inv}, "homelab", inputsFromJSON(t, homelabJSON))
	if err == nil || !strings.Contains(err.Error(), `nodes.worker-2.pciDevices[0].mapping: "gpu" is not a PCI resource mapping of this Proxmox cluster (mappings: nic)`) {
		t.Errorf("a missing PCI mapping: %v", err)
	}
}

// At preview (nothing is created) the image, its downloads and the secrets are registered while
// Proxmox is still asked, and the inventory's problems still fail the preview; at `up` nothing
// is registered before Proxmox answered (TestConstructChecksTheInventory).
func TestPreviewRegistersWhileProxmoxIsAsked(t *testing.T) {
	t.Parallel()

	for _, up := range []bool{false, true} {
		r := &recorder{inventoryWaits: make(chan struct{})}

		if _, err := constructAs(t, r, "homelab", inputsFromJSON(t, homelabJSON), !up); err != nil {
			t.Fatal(err)
		}

		r.mu.Lock()
		waited := r.inventoryWaited
		r.mu.Unlock()

		if waited == up {
			t.Errorf("up %v: the secrets were registered before Proxmox answered: %v", up, waited)
		}

		if vms := r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine"); len(vms) != 5 {
			t.Errorf("up %v: %d VMs registered, want 5", up, len(vms))
		}
	}

	inv := labInventory()
	inv.Nodes = []string{"pve1", "pve3"}
	r := &recorder{proxmox: inv}

	_, err := constructAs(t, r, "homelab", inputsFromJSON(t, homelabJSON), true)
	if err == nil || !strings.Contains(err.Error(), `nodes.cp-2.hostNode: "pve2" is not a node of this Proxmox cluster`) {
		t.Fatalf("the preview does not report the missing host: %v", err)
	}

	if vms := r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine"); len(vms) != 0 {
		t.Errorf("%d VMs registered at a preview Proxmox cannot serve", len(vms))
	}
}

// An input Proxmox would be asked about but that is already refused is not checked against the
// inventory: `image.contentType: raw` gets its own error (use import or iso), not a second one
// telling the user to enable "raw" content on the datastore, a content type Proxmox does not
// have. The inventory's other problems are still reported with it.
func TestRefusedInputIsNotCheckedAgainstTheInventory(t *testing.T) {
	t.Parallel()

	inv := labInventory()
	inv.Nodes = []string{"pve1", "pve3"}

	in := strings.Replace(homelabJSON, `"image": {"extensions"`, `"image": {"contentType": "raw", "extensions"`, 1)
	if in == homelabJSON {
		t.Fatal("the test input has no image to set the content type of")
	}

	_, err := construct(t, &recorder{proxmox: inv}, "homelab", inputsFromJSON(t, in))
	if err == nil {
		t.Fatal("construct accepted image.contentType raw")
	}

	msg := err.Error()
	if !strings.Contains(msg, `image.contentType: "raw" is not supported; use "import"`) {
		t.Errorf("no error names image.contentType:\n%s", msg)
	}

	if strings.Contains(msg, `enable "raw"`) || strings.Contains(msg, "cannot hold raw content") {
		t.Errorf("the inventory check also reports the refused content type:\n%s", msg)
	}

	if !strings.Contains(msg, `nodes.cp-2.hostNode: "pve2" is not a node`) {
		t.Errorf("the inventory's own problems are no longer reported beside the input's:\n%s", msg)
	}
}
