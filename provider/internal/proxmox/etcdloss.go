package proxmox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// EtcdLoss is what this `up` does to the control planes of a running cluster when it keeps none
// of them: the ones whose VM it replaces (the proxmoxve provider re-creates a VM whose host or VM
// id changes) and the ones it removes. It is empty when at least one control plane keeps its VM
// (the others then join its etcd), for a new cluster, and when Proxmox was not asked.
func (inv *Inventory) EtcdLoss(c *spec.Cluster) spec.DataLoss {
	var loss spec.DataLoss
	if inv == nil || inv.IsNew(c.Name) {
		return loss
	}

	loss.Reasons = map[string]string{}
	declared := map[string]bool{}

	for _, n := range c.ControlPlanes() {
		declared[n.Name] = true

		own := ownVMs(c.Name, n.Name, inv.VMs)
		if len(own) == 0 {
			continue // a new control plane
		}

		why := replacement(c, n, own[0])
		if why == "" {
			return spec.DataLoss{} // a control plane that stays keeps etcd's data
		}

		loss.Replaced = append(loss.Replaced, n.Name)
		loss.Reasons[n.Name] = why
	}

	for _, v := range inv.VMs {
		if isOwnVM(c.Name, v.Tags) && slices.Contains(v.Tags, string(spec.RoleControlPlane)) && !declared[v.Name] &&
			!slices.Contains(loss.Removed, v.Name) && (v.Template == nil || !*v.Template) {
			loss.Removed = append(loss.Removed, v.Name)
		}
	}

	slices.Sort(loss.Removed)

	return loss
}

// Replacement says why this `up` replaces node n's VM ("" when it does not, or the node has none
// yet, or Proxmox was not asked): the proxmoxve provider re-creates a VM whose host or VM id
// changes, and the component one whose Secure Boot or disk encryption changes (spec.SecurityTags).
func (inv *Inventory) Replacement(c *spec.Cluster, n spec.Node) string {
	if inv == nil {
		return ""
	}

	own := ownVMs(c.Name, n.Name, inv.VMs)
	if len(own) == 0 {
		return ""
	}

	return replacement(c, n, own[0])
}

// SecurityChange says how node n's VM's Secure Boot or disk encryption changes ("" when it does
// not, or the VM is new or adopted: an adopted VM keeps its firmware, and its tags only gain the
// node's).
func (inv *Inventory) SecurityChange(c *spec.Cluster, n spec.Node) string {
	if inv == nil {
		return ""
	}

	own := ownVMs(c.Name, n.Name, inv.VMs)
	if len(own) == 0 || slices.Contains(own[0].Tags, AdoptedTag) {
		return ""
	}

	return securityChange(c, n, own[0].Tags)
}

// AdoptedSecurityChanges refuses a declaration that changes the Secure Boot or disk encryption of
// an adopted node's VM (tagged when it was adopted, after its node was read): the component never
// replaces an adopted VM, so the change would reach only its configuration and installer. A VM
// adopted before the component tagged these has none of the tags: what it runs is unknown, so a
// declaration of Secure Boot or encryption is only warned about (it is taken as what the node runs).
func (inv *Inventory) AdoptedSecurityChanges(c *spec.Cluster) (problems []error, warnings []string) {
	if inv == nil {
		return nil, nil
	}

	for _, n := range c.Nodes {
		own := ownVMs(c.Name, n.Name, inv.VMs)
		if len(own) == 0 || !slices.Contains(own[0].Tags, AdoptedTag) {
			continue
		}

		if !slices.ContainsFunc(own[0].Tags, spec.IsSecurityTag) {
			if declared := c.SecurityTags(n); len(declared) > 0 {
				warnings = append(warnings, fmt.Sprintf("node %s was adopted before the component recorded how a node was installed: "+
					"it takes the declaration (%s) as what the node runs, and never replaces an adopted VM to change it",
					n.Name, spec.SecurityOf(declared)))
			}

			continue
		}

		if why := securityChange(c, n, own[0].Tags); why != "" {
			problems = append(problems, fmt.Errorf("nodes.%s: %s, but the node was adopted and keeps how it was installed (the "+
				"component never replaces an adopted VM); declare image.secureBoot and diskEncryption as it runs, or remove the "+
				"node and add it again under a new name", n.Name, strings.TrimPrefix(why, "its ")))
		}
	}

	return problems, warnings
}

func replacement(c *spec.Cluster, n spec.Node, v vm.GetVirtualMachinesVm) string {
	switch {
	case v.NodeName != n.HostNode:
		return fmt.Sprintf("its VM moves from Proxmox host %s to %s", v.NodeName, n.HostNode)
	case n.VMID != 0 && v.VmId != n.VMID:
		return fmt.Sprintf("its VM id changes from %d to %d", v.VmId, n.VMID)
	case slices.Contains(v.Tags, AdoptedTag):
		return ""
	}

	return securityChange(c, n, v.Tags)
}

// securityChange compares the security tags a VM has with those node n declares: Talos installs a
// Secure Boot node anew (it cannot move a running one to a signed boot), and creates an encrypted
// STATE or EPHEMERAL only when it formats it, so either change is a new VM.
func securityChange(c *spec.Cluster, n spec.Node, tags []string) string {
	var had []string
	for _, t := range tags {
		if spec.IsSecurityTag(t) {
			had = append(had, t)
		}
	}

	slices.Sort(had)

	want := c.SecurityTags(n)
	slices.Sort(want)

	if slices.Equal(had, want) {
		return ""
	}

	return fmt.Sprintf("its Secure Boot or disk encryption changes from %s to %s, which Talos applies only to a new installation",
		spec.SecurityOf(had), spec.SecurityOf(want))
}

// instancePrefix starts the tag that names a VM instance (wire.Machines.Instance).
const instancePrefix = spec.InstanceTagPrefix

// Instance is the instance tag of node's VM: the one it has (Proxmox holds it), else a new one
// for the VM about to be created.
func (inv *Inventory) Instance(cluster, node string) string {
	if inv != nil {
		for _, v := range ownVMs(cluster, node, inv.VMs) {
			for _, t := range v.Tags {
				if strings.HasPrefix(t, instancePrefix) {
					return t
				}
			}
		}
	}

	b := make([]byte, 4)
	_, _ = rand.Read(b)

	return instancePrefix + hex.EncodeToString(b)
}
