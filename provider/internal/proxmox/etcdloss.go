package proxmox

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

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

		v := own[0]

		switch {
		case v.NodeName != n.HostNode:
			loss.Replaced = append(loss.Replaced, n.Name)
			loss.Reasons[n.Name] = fmt.Sprintf("its VM moves from Proxmox host %s to %s", v.NodeName, n.HostNode)
		case n.VMID != 0 && v.VmId != n.VMID:
			loss.Replaced = append(loss.Replaced, n.Name)
			loss.Reasons[n.Name] = fmt.Sprintf("its VM id changes from %d to %d", v.VmId, n.VMID)
		default:
			return spec.DataLoss{} // a control plane that stays keeps etcd's data
		}
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
