package proxmox

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// Need is one privilege the component needs on one ACL path, and why. Proxmox checks some
// privileges with alternatives: Any lists privileges that serve as well on the same path, Alt a
// set that serves on another path (all of them).
type Need struct {
	Path string
	Priv string
	What string
	Any  []string
	Alt  *AltNeed
}

// AltNeed is a set of privileges on another path that serves instead of a Need's.
type AltNeed struct {
	Path  string
	Privs []string
}

// The privileges of the VMs, in the order the role lists them. The calls behind each, as PVE
// checks them (the API schema's permissions, then qemu-server's create_vm and update_vm_api):
//
//   - VM.Allocate: POST /nodes/{node}/qemu (on /vms/{vmid}), DELETE /nodes/{node}/qemu/{vmid}
//   - VM.Audit: GET …/config, …/status/current, and /cluster/resources lists only these VMs
//   - VM.Config.CPU: cores, sockets, cpu; VM.Config.Memory: memory, balloon
//   - VM.Config.Disk: boot, PUT …/resize (the OS disk grows to its size after the import)
//   - VM.Config.Network: net0, and ipconfig0 and nameserver (VM.Config.Cloudinit or Network)
//   - VM.Config.HWType: machine, scsihw, and every hostpci
//   - VM.Config.Options: name, description, tags, ostype, onboot, bios, agent
//   - VM.PowerMgmt: …/status/start and …/status/stop
//   - the guest agent's network-get-interfaces: VM.GuestAgent.Audit (or .Unrestricted) on
//     PVE 9, VM.Monitor on PVE 8
var vmNeeds = []struct{ priv, what string }{
	{"VM.Allocate", "create and destroy the VMs"},
	{"VM.Audit", "read the VMs' configuration and status"},
	{"VM.Config.CPU", "set the VMs' CPUs"},
	{"VM.Config.Memory", "set the VMs' memory"},
	{"VM.Config.Disk", "attach and resize the VMs' disks"},
	{"VM.Config.Network", "set the VMs' network device and cloud-init addresses"},
	{"VM.Config.HWType", "set the VMs' machine type and SCSI controller"},
	{"VM.Config.Options", "set the VMs' name, tags, firmware and start at boot"},
	{"VM.PowerMgmt", "start and stop the VMs"},
}

// GuestAgentPriv is the privilege that reads a VM's guest agent (network-get-interfaces): PVE 9
// split VM.Monitor into VM.GuestAgent.* privileges.
func GuestAgentPriv(pve9 bool) (priv string, any []string) {
	if pve9 {
		return "VM.GuestAgent.Audit", []string{"VM.GuestAgent.Unrestricted"}
	}

	return "VM.Monitor", nil
}

// IsPVE9 tells from GET /version's version ("9.1.3", "8.4.1") whether the API has PVE 9's
// privilege names; an unreadable version counts as the newest.
func IsPVE9(version string) bool {
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)

	return err != nil || n >= 9
}

// Required is every privilege the cluster needs, per ACL path: to create it, to run its day-2
// changes (upgrades download a new image and delete the old one; removed nodes' VMs are stopped
// and destroyed) and to destroy it. vmIDs are the ids AssignVMIDs gave the nodes that pin none; a
// node with neither is checked on /vms. The list is sorted by path, then in the role's order.
func Required(c *spec.Cluster, vmIDs map[string]int, pve9 bool) []Need {
	var needs []Need

	add := func(n Need) {
		i := slices.IndexFunc(needs, func(o Need) bool { return o.Path == n.Path && o.Priv == n.Priv })
		if i < 0 {
			needs = append(needs, n)
			return
		}

		if !strings.Contains(needs[i].What, n.What) {
			needs[i].What += "; " + n.What
		}
	}

	// the image: download-url, then the VMs' import-from, and its deletion when it is replaced
	for _, d := range plan.Build(c).Downloads {
		st := "/storage/" + d.DatastoreID
		add(Need{Path: st, Priv: "Datastore.AllocateTemplate", What: "download the Talos image"})
		add(Need{Path: st, Priv: "Datastore.Allocate", What: "delete replaced Talos images"})
		add(Need{Path: st, Priv: "Datastore.AllocateSpace", Any: []string{"Datastore.Audit"}, What: "list and import the Talos image"})
		add(Need{Path: "/nodes/" + d.HostNode, Priv: "Sys.AccessNetwork", What: "download the Talos image",
			Alt: &AltNeed{Path: "/", Privs: []string{"Sys.Audit", "Sys.Modify"}}})
	}

	agent, agentAny := GuestAgentPriv(pve9)

	for _, n := range c.Nodes {
		vm := "/vms"
		if id := cmpOr(n.VMID, vmIDs[n.Name]); id != 0 {
			vm = fmt.Sprintf("/vms/%d", id)
		}

		for _, v := range vmNeeds {
			add(Need{Path: vm, Priv: v.priv, What: v.what})
		}

		if c.ImageOf(n).GuestAgent {
			add(Need{Path: vm, Priv: agent, Any: agentAny, What: "read the VMs' addresses from the QEMU guest agent"})
		}

		add(Need{Path: "/storage/" + n.DatastoreID, Priv: "Datastore.AllocateSpace", What: "allocate the VMs' disks, EFI disks and cloud-init drives"})

		for _, d := range n.DataDisks {
			add(Need{Path: "/storage/" + d.DatastoreID, Priv: "Datastore.AllocateSpace", What: "allocate the VMs' data disks"})
		}

		bridge := "/sdn/zones/localnetwork/" + n.Bridge
		if n.VLANID != 0 {
			bridge += "/" + strconv.Itoa(n.VLANID)
		}

		add(Need{Path: bridge, Priv: "SDN.Use", What: "attach the VMs to bridge " + n.Bridge})

		for _, p := range n.PCIDevices {
			if p.Mapping != "" {
				add(Need{Path: "/mapping/pci/" + p.Mapping, Priv: "Mapping.Use", What: "pass the PCI mapping " + p.Mapping + " through"})
			}
		}
	}

	for _, t := range c.ProxmoxTokens {
		for _, n := range tokenNeeds(c, t, vmIDs) {
			add(n)
		}
	}

	slices.SortStableFunc(needs, func(a, b Need) int { return strings.Compare(a.Path, b.Path) })

	return needs
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}

	return b
}

// tokenNeeds are the privileges that make a consumer's token (TokenACLPaths): its role
// (Sys.Modify on /access), its user in the pve realm, the token itself, and the ACLs on each path
// — Permissions.Modify there, or as Proxmox also accepts, VM.Allocate (Datastore.Allocate on a
// datastore) with every privilege of the role.
func tokenNeeds(c *spec.Cluster, t spec.ProxmoxToken, vmIDs map[string]int) []Need {
	what := t.Input + "'s Proxmox token"
	needs := []Need{
		{Path: "/access", Priv: "Sys.Modify", What: "create the role of " + what},
		{Path: "/access/groups", Priv: "User.Modify", What: "create the user and API token of " + what},
		{Path: "/access/realm/pve", Priv: "Realm.AllocateUser", What: "create the user of " + what},
	}

	for _, path := range TokenACLPaths(c, t, vmIDs) {
		alloc := "VM.Allocate"
		if strings.HasPrefix(path, "/storage/") {
			alloc = "Datastore.Allocate"
		}

		needs = append(needs, Need{Path: path, Priv: "Permissions.Modify", What: "grant " + what + " its privileges",
			Alt: &AltNeed{Path: path, Privs: append([]string{alloc}, t.Privileges...)}})
	}

	return needs
}

// TokenACLPaths are the paths a consumer's token (and its user) is granted its role on: each
// node's VM (all VMs, /vms, for a node whose id Proxmox chooses) and the token's datastores.
func TokenACLPaths(c *spec.Cluster, t spec.ProxmoxToken, vmIDs map[string]int) []string {
	var paths []string

	for _, n := range c.Nodes {
		path := "/vms"
		if id := cmpOr(n.VMID, vmIDs[n.Name]); id != 0 {
			path = fmt.Sprintf("/vms/%d", id)
		}

		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}

	for _, ds := range t.Storages {
		paths = append(paths, "/storage/"+ds)
	}

	return paths
}
