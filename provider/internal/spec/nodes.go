package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

func buildNodes(p *problems, in Input, c *Cluster) {
	d := in.NodeDefaults
	checkNodeDefaults(p, d)

	c.DiskEncryption = buildDiskEncryption(p, "diskEncryption", in.DiskEncryption)

	if len(in.Nodes) == 0 {
		p.errorf("nodes", "is empty; declare at least one node with role \"controlplane\"")
		return
	}

	// Every node is kept, valid or not: the checks across nodes (addresses, VIP, VM ids, MAC
	// addresses, placement) then see all of them, so one input reports every problem at once.
	for _, name := range slices.Sorted(maps.Keys(in.Nodes)) {
		c.Nodes = append(c.Nodes, buildNode(p, name, in.Nodes[name], in, c))
	}

	checkSecurity(p, in, c)

	if len(in.Nodes) > 0 && !slices.ContainsFunc(slices.Collect(maps.Values(in.Nodes)), func(n NodeInput) bool { return n.Role == string(RoleControlPlane) }) {
		p.errorf("nodes", "has no control plane; give at least one node role \"controlplane\" (three for high availability)")
	}

	workers := 0
	for _, n := range in.Nodes {
		if n.Role == string(RoleWorker) {
			workers++
		}
	}

	if in.AllowSchedulingOnControlPlanes != nil {
		c.AllowSchedulingOnControlPlanes = *in.AllowSchedulingOnControlPlanes
		if !c.AllowSchedulingOnControlPlanes && workers == 0 {
			p.warnf("allowSchedulingOnControlPlanes", "is false but the cluster has no worker; workloads (CoreDNS included) will stay Pending")
		}
	} else {
		c.AllowSchedulingOnControlPlanes = workers == 0
	}

	cps := c.ControlPlanes()
	if len(cps) > 1 && len(cps)%2 == 0 {
		p.warnf("nodes", "has %d control planes; etcd tolerates no more failures with an even count than with one fewer, so use an odd number", len(cps))
	}

	perHost := map[string][]string{}
	for _, n := range cps {
		perHost[n.HostNode] = append(perHost[n.HostNode], n.Name)
	}

	hosts := slices.Sorted(maps.Keys(perHost))
	if len(cps) > 1 {
		for _, h := range hosts {
			if len(perHost[h]) > 1 {
				p.warnf("nodes", "control planes %s all run on Proxmox host %q; losing that host loses etcd quorum, so spread control planes over hosts", strings.Join(perHost[h], ", "), h)
			}
		}
	}
}

func checkNodeDefaults(p *problems, d NodeDefaultsInput) {
	if d.CPU != nil && *d.CPU < 1 {
		p.errorf("nodeDefaults.cpu", "%d is not a CPU count; use 1 or more", *d.CPU)
	}

	if d.DatastoreID != "" && !storageIDRe.MatchString(d.DatastoreID) {
		p.errorf("nodeDefaults.datastoreId", "%q is not a Proxmox storage id; use e.g. \"local-lvm\"", d.DatastoreID)
	}

	if d.Bridge != "" && !bridgeRe.MatchString(d.Bridge) {
		p.errorf("nodeDefaults.bridge", "%q is not a Proxmox bridge name; use e.g. \"vmbr0\"", d.Bridge)
	}

	if d.CPUType != "" && !cpuTypeRe.MatchString(d.CPUType) {
		p.errorf("nodeDefaults.cpuType", "%q is not a Proxmox CPU type; use e.g. \"host\" or \"x86-64-v2-AES\"", d.CPUType)
	}

	if d.VMMachine != "" && !machineRe.MatchString(d.VMMachine) {
		p.errorf("nodeDefaults.vmMachine", "%q is not a Proxmox machine type; use \"q35\" (recommended) or \"pc\"", d.VMMachine)
	}

	if d.BIOS != "" && d.BIOS != "seabios" && d.BIOS != "ovmf" {
		p.errorf("nodeDefaults.bios", "%q is not a Proxmox BIOS; use \"seabios\" or \"ovmf\" (UEFI; the component adds the EFI disk)", d.BIOS)
	}

	switch d.SCSIHardware {
	case "", "virtio-scsi-pci", "lsi", "lsi53c810", "megasas", "pvscsi":
	case "virtio-scsi-single":
		p.warnf("nodeDefaults.scsiHardware", "\"virtio-scsi-single\" makes Talos installs hang (siderolabs/talos#11173); use \"virtio-scsi-pci\"")
	default:
		p.errorf("nodeDefaults.scsiHardware", "%q is not a Proxmox SCSI controller; use \"virtio-scsi-pci\"", d.SCSIHardware)
	}

	checkTags(p, "nodeDefaults.tags", d.Tags)
	parseTaints(p, "nodeDefaults.taints", d.Taints)
}

// buildNode applies the defaults to one node and reports its own problems. It always returns
// the node, so that checks across nodes still run when this one is invalid.
func buildNode(p *problems, name string, in NodeInput, all Input, c *Cluster) Node {
	path := "nodes." + name
	fail := func(field, format string, args ...any) {
		p.errorf(path+"."+field, format, args...)
	}

	if !isDNSLabel(name) {
		p.errorf(path, "the node name %q is its hostname and must be a DNS label: at most 63 lower-case letters, digits and '-'", name)
	}

	d := all.NodeDefaults
	n := Node{
		Name:         name,
		HostNode:     in.HostNode,
		Role:         Role(in.Role),
		IP:           in.IP,
		IP6:          in.IP6,
		CPU:          firstInt(in.CPU, d.CPU, Defaults.CPU),
		MemoryMiB:    firstInt(in.MemoryMiB, d.MemoryMiB, Defaults.MemoryMiB),
		DiskSizeGiB:  firstInt(in.DiskSizeGiB, d.DiskSizeGiB, Defaults.DiskSizeGiB),
		DatastoreID:  firstString(in.DatastoreID, d.DatastoreID, Defaults.DatastoreID),
		Bridge:       firstString(in.Bridge, d.Bridge, all.Network.Bridge, Defaults.Bridge),
		VLANID:       firstInt(in.VLANID, all.Network.VLANID, 0),
		CPUType:      firstString(d.CPUType, Defaults.CPUType),
		VMMachine:    firstString(d.VMMachine, Defaults.VMMachine),
		BIOS:         firstString(d.BIOS, Defaults.BIOS),
		SCSIHardware: firstString(d.SCSIHardware, Defaults.SCSI),
		Labels:       maps.Clone(in.Labels),
		InstallDisk:  firstString(in.InstallDisk, Defaults.InstallDisk),
	}

	switch {
	case in.HostNode == "":
		fail("hostNode", "is required; name the Proxmox host (as in the Proxmox UI) that runs this VM, e.g. \"pve1\"")
	case !hostNodeRe.MatchString(in.HostNode):
		fail("hostNode", "%q is not a Proxmox node name; use the host name shown in the Proxmox UI, e.g. \"pve1\"", in.HostNode)
	}

	switch n.Role {
	case RoleControlPlane, RoleWorker:
	case "":
		fail("role", "is required; use \"controlplane\" or \"worker\"")
	default:
		fail("role", "%q is not a role; use \"controlplane\" or \"worker\"", in.Role)
	}

	if in.MACAddress != "" {
		mac, why := normaliseMAC(in.MACAddress)
		if why != "" {
			fail("macAddress", "%q %s", in.MACAddress, why)
		}
		n.MACAddress = mac
	}

	if in.VMID != nil {
		n.VMID = *in.VMID
		if n.VMID < 100 || n.VMID > 999999999 {
			fail("vmId", "%d is not a Proxmox VM id; use 100 to 999999999, or leave it unset for one from vmIdRange", n.VMID)
		}
	}

	from := func(own *int, def *int, field string) string {
		if own == nil && def != nil {
			return " (from nodeDefaults." + field + ")"
		}
		return ""
	}

	if n.CPU < 1 {
		fail("cpu", "%d is not a CPU count; use 1 or more%s", n.CPU, from(in.CPU, d.CPU, "cpu"))
	} else if n.Role == RoleControlPlane && n.CPU < MinControlPlaneCPU {
		fail("cpu", "%d is below the %d CPUs a control plane needs%s; set cpu to %d or more", n.CPU, MinControlPlaneCPU, from(in.CPU, d.CPU, "cpu"), MinControlPlaneCPU)
	}

	switch {
	case n.Role == RoleControlPlane && n.MemoryMiB < MinControlPlaneMemoryMiB:
		fail("memoryMib", "%d is below the %d MiB a control plane needs%s; set memoryMib to %d or more (4096 recommended)", n.MemoryMiB, MinControlPlaneMemoryMiB, from(in.MemoryMiB, d.MemoryMiB, "memoryMib"), MinControlPlaneMemoryMiB)
	case n.MemoryMiB < MinWorkerMemoryMiB:
		fail("memoryMib", "%d is below the %d MiB Talos needs to run%s; set memoryMib to %d or more", n.MemoryMiB, MinWorkerMemoryMiB, from(in.MemoryMiB, d.MemoryMiB, "memoryMib"), MinWorkerMemoryMiB)
	}

	if n.DiskSizeGiB < MinDiskSizeGiB {
		fail("diskSizeGib", "%d is below the %d GiB Talos needs for its OS disk%s; set diskSizeGib to %d or more", n.DiskSizeGiB, MinDiskSizeGiB, from(in.DiskSizeGiB, d.DiskSizeGiB, "diskSizeGib"), MinDiskSizeGiB)
	}

	if in.DatastoreID != "" && !storageIDRe.MatchString(in.DatastoreID) {
		fail("datastoreId", "%q is not a Proxmox storage id; use e.g. \"local-lvm\"", in.DatastoreID)
	}

	if in.Bridge != "" && !bridgeRe.MatchString(in.Bridge) {
		fail("bridge", "%q is not a Proxmox bridge name; use e.g. \"vmbr0\"", in.Bridge)
	}

	if in.VLANID != nil && (*in.VLANID < 1 || *in.VLANID > 4094) {
		fail("vlanId", "%d is not a VLAN id; use 1 to 4094, or leave it unset for network.vlanId", *in.VLANID)
	}

	if !installDiskRe.MatchString(n.InstallDisk) {
		fail("installDisk", "%q is not a device path; use e.g. \"/dev/sda\" (SCSI disks, the default) or \"/dev/vda\" (VirtIO block)", n.InstallDisk)
	}

	checkTags(p, path+".tags", in.Tags)
	n.Tags = nodeTags(c.Name, n.Role, d.Tags, in.Tags)

	for _, k := range slices.Sorted(maps.Keys(in.Labels)) {
		at := path + ".labels"
		if k == "topology.kubernetes.io/region" || k == "topology.kubernetes.io/zone" {
			fail("labels", "%q is set by the component (region = proxmoxClusterName, zone = hostNode); remove it, or set proxmoxClusterName", k)
			continue
		}
		if why := checkLabel(k, in.Labels[k]); why != "" {
			p.errorf(at, "%s", why)
		} else if n.Role == RoleWorker && nodeRestricted(k) {
			p.errorf(at, "%q: a worker cannot set a label of the kubernetes.io or k8s.io namespaces itself (Talos writes a worker's "+
				"labels with its kubelet's credentials, which the NodeRestriction admission plugin limits to node.kubernetes.io/ and "+
				"kubelet.kubernetes.io/ ones); use another prefix, e.g. example.com/role, or label the Node with an admin's credentials", k)
		}
	}

	// nodeDefaults.taints' problems are reported once, by checkNodeDefaults.
	n.Taints = nodeTaints(parseTaints(&problems{}, "nodeDefaults.taints", d.Taints), parseTaints(p, path+".taints", in.Taints))

	n.Image = nodeImage(p, path+".image", in.Image, c)
	buildGPU(p, path, in, &n, c)
	buildSecurity(p, path, in, all, &n, c)

	if sec := c.SecurityTags(n); len(sec) > 0 {
		n.Tags = append(n.Tags, sec...)
		slices.Sort(n.Tags)
	}

	if !c.Network.IPv4 {
		n.IP = in.IP6 // IPv6-only: the node is reached at its IPv6 address
	}

	buildNICs(p, path, in, all, &n, c)

	n.DataDisks = buildDataDisks(p, path, in.DataDisks, n.DatastoreID)
	n.PCIDevices = buildPCIDevices(p, path, in.PCIDevices, n.VMMachine)
	checkPatches(p, path+".configPatches", in.ConfigPatches)

	return n
}

func checkTags(p *problems, path string, tags []string) {
	for i, t := range tags {
		if !tagRe.MatchString(t) {
			hint := ""
			if lower := strings.ToLower(t); tagRe.MatchString(lower) {
				hint = fmt.Sprintf(" (Proxmox stores tags in lower case: use %q)", lower)
			}
			p.errorf(fmt.Sprintf("%s[%d]", path, i), "%q is not a Proxmox tag; use lower-case letters, digits, '_', '-', '+' and '.'%s", t, hint)
		}

		// The component tags each VM it creates with "talos-i-<8 hex>", the instance it is
		// (a replaced VM gets a new one): a user tag of that form would be taken for it.
		if strings.HasPrefix(t, InstanceTagPrefix) {
			p.errorf(fmt.Sprintf("%s[%d]", path, i), "%q: tags starting with %q name the VM's instance and are the component's own; choose another tag", t, InstanceTagPrefix)
		}

		// A VM's security tags say how it was installed; one set by hand would replace the VM.
		if IsSecurityTag(t) {
			p.errorf(fmt.Sprintf("%s[%d]", path, i), "%q: the component tags a VM with its Secure Boot and disk encryption (image.secureBoot, "+
				"diskEncryption); choose another tag", t)
		}
	}
}

// InstanceTagPrefix starts the tag that names a VM instance, which only the component sets.
const InstanceTagPrefix = "talos-i-"

// nodeTags are the VM's tags, sorted and unique as Proxmox stores them (anything else diffs
// on every refresh).
func nodeTags(cluster string, role Role, defaults, own []string) []string {
	tags := []string{"talos", string(role), cluster}
	tags = append(tags, defaults...)
	tags = append(tags, own...)
	slices.Sort(tags)

	return slices.Compact(tags)
}
