package proxmox

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// AssignVMIDs gives every node that pins no vmId a stable VM id, so that a create retried after
// a failure (bpg gives up on a VM create whose task status it could not read, after Proxmox made
// the VM) asks for the same id: Proxmox then refuses a second VM instead of making one, and the
// VM guard (VMGuard) clears the leftover first.
//
//   - A node whose VM exists (its name, tagged `talos` and the cluster's name, on any host) keeps
//     that VM's id, whatever range it came from: VMs made before ids were assigned keep theirs and
//     no running VM is replaced for an id.
//   - Any other node gets the first id not taken by a VM, from a hash of the cluster and node
//     names into vmIdRange, going up (and round) from there; nodes are placed by name.
//   - Two VMs of one node (left by a create interrupted before ids were stable) make its id
//     ambiguous: it is left to Proxmox, as before, with a warning saying which VM to delete.
//
// Without an inventory (Proxmox not asked, or answering nothing at preview) nothing is assigned
// and Proxmox chooses, as it did before.
func AssignVMIDs(c *spec.Cluster, inv *Inventory) (map[string]int, []string, error) {
	if c == nil || inv == nil || len(inv.Nodes) == 0 {
		return nil, nil, nil
	}

	taken := map[int]bool{}
	for _, v := range inv.VMs {
		taken[v.VmId] = true
	}

	for _, n := range c.Nodes {
		if n.VMID != 0 {
			taken[n.VMID] = true
		}
	}

	ids := map[string]int{}

	var (
		fresh    []spec.Node
		warnings []string
	)

	for _, n := range c.Nodes {
		if n.VMID != 0 {
			continue
		}

		own := ownVMs(c.Name, n.Name, inv.VMs)
		switch len(own) {
		case 0:
			fresh = append(fresh, n)
		case 1:
			ids[n.Name] = own[0].VmId
		default:
			var list []string
			for _, v := range own {
				list = append(list, fmt.Sprintf("%d on %s", v.VmId, v.NodeName))
			}

			warnings = append(warnings, fmt.Sprintf("nodes.%s: Proxmox has %d VMs of this node (%s), one of them left by an "+
				"interrupted create; delete the one that is not in the stack's state (`pulumi stack export` shows the vmId of "+
				"the other); until then this node keeps letting Proxmox choose its VM id", n.Name, len(own), strings.Join(list, ", ")))
		}
	}

	r := c.VMIDs
	for _, n := range fresh {
		id, ok := firstFree(r, hashedVMID(r, c.Name, n.Name), taken)
		if !ok {
			return nil, nil, fmt.Errorf("vmIdRange: every id from %d to %d is taken by a VM; widen the range or move it", r.Start, r.End)
		}

		taken[id] = true
		ids[n.Name] = id
	}

	return ids, warnings, nil
}

// ownVMs are the VMs of a cluster's node: its name, tagged `talos` and the cluster's name, as the
// component tags them (spec.nodeTags).
func ownVMs(cluster, node string, vms []vm.GetVirtualMachinesVm) []vm.GetVirtualMachinesVm {
	var own []vm.GetVirtualMachinesVm
	for _, v := range vms {
		if v.Name == node && isOwnVM(cluster, v.Tags) && (v.Template == nil || !*v.Template) {
			own = append(own, v)
		}
	}

	return own
}

func isOwnVM(cluster string, tags []string) bool {
	return slices.Contains(tags, "talos") && slices.Contains(tags, cluster)
}

// hashedVMID is where a node's search for a free id starts: FNV-1a of "<cluster>/<node>" into r.
func hashedVMID(r spec.VMIDRange, cluster, node string) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(cluster + "/" + node))

	return r.Start + int(h.Sum64()%uint64(r.Size()))
}

// firstFree is the first id from start, going up and round r, that is not taken.
func firstFree(r spec.VMIDRange, start int, taken map[int]bool) (int, bool) {
	for i := range min(r.Size(), len(taken)+1) {
		id := r.Start + (start-r.Start+i)%r.Size()
		if !taken[id] {
			return id, true
		}
	}

	return 0, false
}
