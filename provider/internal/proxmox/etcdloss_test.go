package proxmox

import (
	"strings"
	"testing"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// A VM whose security tags differ from its node's declaration is replaced (and the only control
// plane's replacement loses etcd); equal tags, a new VM and an adopted VM are not.
func TestSecurityChangeReplacesTheVM(t *testing.T) {
	t.Parallel()

	c, err := spec.Build(spec.Input{
		ClusterName: "home", TalosVersion: "v1.14.1", Network: spec.NetworkInput{Gateway: "10.0.0.1"},
		Image:          spec.ImageInput{SecureBoot: new(true)},
		DiskEncryption: &spec.DiskEncryptionInput{State: spec.KeyTPM},
		Nodes: map[string]spec.NodeInput{
			"cp-1": {HostNode: "pve1", Role: "controlplane", IP: "10.0.0.11"},
			"w-1":  {HostNode: "pve1", Role: "worker", IP: "10.0.0.21"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	vmOf := func(name string, extra ...string) vm.GetVirtualMachinesVm {
		return vm.GetVirtualMachinesVm{Name: name, NodeName: "pve1", VmId: 900, Tags: append([]string{"home", "talos", "talos-i-00aa11bb"}, extra...)}
	}

	same := []string{"talos-luks-state-tpm", spec.SecureBootTag}
	inv := &Inventory{Nodes: []string{"pve1"}, VMs: []vm.GetVirtualMachinesVm{vmOf("cp-1"), vmOf("w-1", same...)}}

	cp, w := c.Nodes[0], c.Nodes[1]

	why := inv.Replacement(c, cp)
	if !strings.Contains(why, "from no Secure Boot nor disk encryption to Secure Boot, STATE encrypted with tpm") || inv.SecurityChange(c, cp) == "" {
		t.Errorf("a plain VM turned Secure Boot: %q", why)
	}

	if why := inv.Replacement(c, w); why != "" {
		t.Errorf("a VM with its declared tags is replaced: %q", why)
	}

	if loss := inv.EtcdLoss(c); len(loss.Replaced) != 1 || !strings.Contains(loss.Reasons["cp-1"], "Secure Boot") {
		t.Errorf("the only control plane's replacement: %+v", loss)
	}

	adopted := &Inventory{Nodes: []string{"pve1"}, VMs: []vm.GetVirtualMachinesVm{vmOf("cp-1", AdoptedTag)}}
	if why, sec := adopted.Replacement(c, cp), adopted.SecurityChange(c, cp); why != "" || sec != "" {
		t.Errorf("an adopted VM is replaced for its tags: %q %q", why, sec)
	}

	// Adopted, and tagged then (STATE with nodeID): the declaration's change is refused, not half-applied.
	tagged := &Inventory{Nodes: []string{"pve1"}, VMs: []vm.GetVirtualMachinesVm{vmOf("cp-1", AdoptedTag, "talos-luks-state-nodeid")}}
	if problems, _ := tagged.AdoptedSecurityChanges(c); len(problems) != 1 || !strings.Contains(problems[0].Error(), "nodes.cp-1: Secure Boot or disk encryption changes") {
		t.Errorf("an adopted VM's security change: %v", problems)
	}

	// Adopted before the tags existed: what it runs is unknown, the declaration is taken, with a warning.
	if problems, warnings := adopted.AdoptedSecurityChanges(c); len(problems) != 0 || len(warnings) != 1 {
		t.Errorf("a VM adopted before security tags: %v %v", problems, warnings)
	}

	if problems, warnings := inv.AdoptedSecurityChanges(c); len(problems)+len(warnings) != 0 {
		t.Errorf("the component's own VMs refused as adopted: %v %v", problems, warnings)
	}

	if why := (&Inventory{Nodes: []string{"pve1"}}).Replacement(c, cp); why != "" {
		t.Errorf("a new node is replaced: %q", why)
	}
}
