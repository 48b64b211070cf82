package wire

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/proxmox"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/lifecycle"
)

// Machines is what VirtualMachines returns: every node's VM, VM id and address, by node name.
type Machines struct {
	VMs       map[string]pulumi.Resource
	VMIDs     map[string]pulumi.IntOutput
	Addresses Addresses
	// instances are the nodes' VM instances (see Instance), by node name.
	instances map[string]string
	// adopted are the nodes whose VMs the component adopted (proxmox.Adoptee), by node name.
	adopted map[string]proxmox.Adoptee
}

// Adopted tells whether node n runs on a VM the component adopted: its first configuration was
// applied before the component knew it, so it gets none from the talos provider.
func (m *Machines) Adopted(n string) bool {
	_, ok := m.adopted[n]
	return ok
}

// Instance are the options that bind a resource about node n to its VM: replaced with it, and
// replaced when the VM is a new one without a replacement (a VM lost outside Pulumi, which
// `pulumi refresh` dropped from the state, is created again: the configuration and the records of
// the node must start again with it). A VM's instance is its `talos-i-…` tag, which the component
// gives a VM when it creates it and keeps while the VM exists (a replacement keeps it too), read
// from Proxmox' inventory: known at preview, and the same from one `up` to the next.
func (m *Machines) Instance(n string) []pulumi.ResourceOption {
	return []pulumi.ResourceOption{
		pulumi.ReplaceWith([]pulumi.Resource{m.VMs[n]}),
		pulumi.ReplacementTrigger(pulumi.String(m.instances[n])),
	}
}

// Instances are the nodes' VM instances (Instance), by node name.
func (m *Machines) Instances(nodes []string) map[string]string {
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		out[n] = m.instances[n]
	}

	return out
}

// VirtualMachines registers one VM per node with the settings Talos documents for Proxmox, from
// the image downloads (Image), the VM ids assigned (proxmox.AssignVMIDs: 0 or missing lets
// Proxmox choose) and the VM guard's hooks. No VM is created before every node's configuration
// is known to be valid (Configs.Checked). A DHCP node's address is searched for through a
// lifecycle NodeAddress resource served by self.
//
// The VMs also wait for after (the etcd snapshot of this `up`, when one is taken before a VM is
// replaced).
//
// The VMs of adoptees (an adopted cluster's; proxmox.Adoptee) are imported by the `up` that adopts
// them, not created, and keep the settings the component does not declare (adoptedIgnoredPaths).
func VirtualMachines(s Scope, p *plan.Plan, files []ImageFile, vmIDs map[string]int, inv *proxmox.Inventory,
	adoptees map[string]proxmox.Adoptee, guard *proxmox.VMGuard, checked pulumi.ResourceArrayOutput, after []pulumi.Resource, self Lifecycle,
) (*Machines, error) {
	m := &Machines{
		VMs: map[string]pulumi.Resource{}, VMIDs: map[string]pulumi.IntOutput{}, Addresses: Addresses{},
		instances: map[string]string{}, adopted: adoptees,
	}

	for _, v := range p.VMs {
		vmid := v.Node.VMID
		if vmid == 0 {
			vmid = vmIDs[v.Node.Name]
		}

		instance := inv.Instance(s.Cluster.Name, v.Node.Name)
		m.instances[v.Node.Name] = instance

		args := vmArgs(s.Cluster, v, files[v.Download], vmid, instance)
		ignored := vmIgnoredPaths(len(v.Disks))

		var opts []pulumi.ResourceOption

		// A VM this `up` replaces is made from the image its node runs now and with its cloud-init
		// as declared now: they are ignored only for the VM that stays (else the engine would keep the old VM's, an
		// image of another version, host or Secure Boot, perhaps deleted since). So is the VM of a
		// running cluster's node that Proxmox does not hold: a replacement whose create failed
		// after its delete (the state keeps the old VM, pending replacement) must not be retried
		// from the old one (a new node's VM has no old source either way).
		_, adoptee := adoptees[v.Node.Name] // imported as it is: its source stays ignored
		why := inv.Replacement(s.Cluster, v.Node)
		if why != "" || (!adoptee && inv != nil && len(inv.Nodes) > 0 && !inv.IsNew(s.Cluster.Name) && !inv.HasVM(s.Cluster.Name, v.Node.Name)) {
			ignored = slices.DeleteFunc(ignored, isCreateOnly)
		}

		if why != "" {
			// Its security tags change, which the proxmoxve provider would apply in place: the
			// component replaces the VM, and says why at preview.
			if inv.SecurityChange(s.Cluster, v.Node) != "" {
				opts = append(opts, pulumi.ReplaceOnChanges([]string{"tags"}))
			}

			s.warn(fmt.Sprintf("node %s: its VM is replaced: %s", v.Node.Name, why))
		}

		if a, ok := adoptees[v.Node.Name]; ok {
			args.VmId = pulumi.Int(a.VMID)
			args.Tags = pulumi.ToStringArray(adoptedTags(v.Node.Tags, instance, a.Tags))
			ignored = append(ignored, adoptedIgnoredPaths(len(v.Disks))...)

			// Every time, not only on the `up` that imports it (see proxmox.Adoptee.ImportID).
			opts = append(opts, pulumi.Import(pulumi.ID(a.ImportID())))
		} else {
			// The guard clears what an interrupted create of the component's own VM left; an
			// adopted VM is never created (nor cleared) by it.
			hooks, err := guard.Hooks(v.Node, vmid, s.child(v.Node.Name), why != "")
			if err != nil {
				return nil, errorf("registering the VM guard of node %s: %w", v.Node.Name, err)
			}

			opts = append(opts, hooks...)
		}

		machine, err := vm.NewVirtualMachine(s.Ctx, s.child(v.Node.Name), args,
			append([]pulumi.ResourceOption{
				s.parent(),
				// A replacement VM keeps the node's address and its VM id, so the old one must
				// go first.
				pulumi.DeleteBeforeReplace(true),
				pulumi.IgnoreChanges(ignored),
				// No VM before every node's configuration is known to be valid (CheckConfigs).
				pulumi.DependsOnInputs(checked),
				pulumi.DependsOn(after),
			}, opts...)...,
		)
		if err != nil {
			return nil, errorf("registering the VM of node %s: %w", v.Node.Name, err)
		}

		m.VMs[v.Node.Name] = machine
		m.VMIDs[v.Node.Name] = machine.VmId

		if s.Cluster.Network.DHCP {
			ip, err := nodeAddress(s, v.Node, machine, self)
			if err != nil {
				return nil, err
			}

			m.Addresses[v.Node.Name] = ip
		} else {
			m.Addresses[v.Node.Name] = pulumi.String(v.Node.IP).ToStringOutput()
		}
	}

	return m, nil
}

// vmIgnoredPaths are the VM properties whose changes the component ignores (the bridged
// provider does not honour a `disks[*]` wildcard, so every disk is listed):
//   - the OS disk's source image: it only matters when the VM is created. A new Talos version or
//     schematic must not re-create running VMs (fileId forces a new VM, and all of them at once
//     would lose etcd); new nodes get the new image. Running nodes are upgraded in place, one
//     at a time, by their NodeUpgrade (Operate).
//   - every disk's speed block: the proxmoxve provider defaults it to zeros but reads disks back
//     without one, so every disk would show a diff on every preview. The component never sets it.
//   - the CD-ROM drive: VMs made before it was set empty keep the host's drive (it holds nothing
//     the nodes read) rather than each being updated, which would need VM.Config.CDROM.
//   - the cloud-init drive: Talos reads it only in maintenance mode, and the running node's
//     addresses, resolvers and networks come from its configuration, which changes live. The
//     proxmoxve provider reboots a VM whose cloud-init changes (reboot_after_update), and Pulumi
//     updates every VM at once: making a cluster dual-stack or changing the resolvers would
//     reboot every node together and lose etcd's quorum.
func vmIgnoredPaths(disks int) []string {
	// The OS disk's source and the cloud-init drive matter at creation only (isCreateOnly).
	paths := []string{"disks[0].fileId", "disks[0].importFrom", "cdrom", "initialization"}
	for i := range disks {
		paths = append(paths, fmt.Sprintf("disks[%d].speed", i))
	}

	return paths
}

// isCreateOnly tells the paths of vmIgnoredPaths that a VM made anew must take from its node as
// it is now (ignoreChanges would give it the old VM's): the OS disk's source image and the
// cloud-init drive.
func isCreateOnly(path string) bool {
	return path == "disks[0].fileId" || path == "disks[0].importFrom" || path == "initialization"
}

// adoptedIgnoredPaths are the settings an adopted VM keeps as it was made (by Terraform, talosctl's
// users, another program): the component does not expose them, and its own choices for them
// (firmware, machine type, CPU type, disk cache and discard, the cloud-init drive, …) would change
// a running node's hardware — some only with a reboot — just because it was adopted. What the node
// declares (name, host, CPU cores, memory, disks' sizes and datastores, NIC bridge, VLAN and MAC,
// tags, PCI devices) is applied, and shown at preview (proxmox.VMDifferences).
func adoptedIgnoredPaths(disks int) []string {
	paths := []string{
		"description", "machine", "bios", "scsiHardware", "operatingSystem", "cpu.type", "cpu.sockets", "memory.floating",
		"agent", "networkDevices[0].model", "initialization", "onBoot", "efiDisk",
		// Settings the proxmoxve provider defaults when the program does not set them, and
		// applies to a running VM only with a reboot (its watchdog block, say, which an imported
		// VM made without one would otherwise get, rebooted).
		"acpi", "amdSev", "audioDevice", "bootOrders", "hookScriptFileId", "hotplug", "keyboardLayout", "kvmArguments",
		"numas", "rngs", "serialDevices", "smbios", "startup", "tabletDevice", "tpmState", "usbs", "vga", "virtiofs",
		"watchdog", "protection", "poolId", "memory.hugepages", "memory.keepHugepages", "memory.shared",
		"cpu.flags", "cpu.units", "cpu.architecture", "cpu.hotplugged", "cpu.limit", "cpu.numa", "cpu.affinity",
		"networkDevices[0].firewall", "networkDevices[0].mtu", "networkDevices[0].queues", "networkDevices[0].rateLimit",
		"networkDevices[0].trunks", "networkDevices[0].enabled", "networkDevices[0].disconnected",
	}
	for i := range disks {
		for _, f := range []string{"fileFormat", "discard", "ssd", "iothread", "serial", "aio", "cache", "backup", "replicate"} {
			paths = append(paths, fmt.Sprintf("disks[%d].%s", i, f))
		}
	}

	return paths
}

// adoptedTags are an adopted VM's tags: the node's with its instance, AdoptedTag, and the tags the
// VM had of its own (the old tool's), kept.
func adoptedTags(tags []string, instance string, own []string) []string {
	out := append(withInstance(tags, instance), proxmox.AdoptedTag)
	for _, t := range own {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}

	return out
}

func vmArgs(c *spec.Cluster, p plan.VM, image ImageFile, vmid int, instance string) *vm.VirtualMachineArgs {
	n := p.Node

	var disks vm.VirtualMachineDiskArray
	for _, d := range p.Disks {
		disk := vm.VirtualMachineDiskArgs{
			Interface:   pulumi.String(d.Interface),
			DatastoreId: pulumi.String(d.DatastoreID),
			Size:        pulumi.Int(d.SizeGiB),
			FileFormat:  pulumi.String("raw"),
			Discard:     pulumi.String("on"),
			Ssd:         pulumi.Bool(true),
			// iothread needs virtio-scsi-single, which Talos must not use.
			Iothread: pulumi.Bool(false),
			Serial:   optionalString(d.Serial),
		}

		switch {
		case d.FromImage && image.ISO:
			disk.FileId = image.ID
		case d.FromImage:
			disk.ImportFrom = image.ID
		}

		disks = append(disks, disk)
	}

	var pcis vm.VirtualMachineHostpciArray
	for _, h := range p.Hostpcis {
		pci := vm.VirtualMachineHostpciArgs{
			Device: pulumi.String(h.Device),
			Pcie:   pulumi.Bool(h.PCIe),
			Rombar: pulumi.Bool(h.ROMBar),
			Xvga:   pulumi.Bool(h.XVGA),
		}
		if h.Mapping != "" {
			pci.Mapping = pulumi.String(h.Mapping)
		} else {
			pci.Id = pulumi.String(h.ID)
		}

		pcis = append(pcis, pci)
	}

	var nics vm.VirtualMachineNetworkDeviceArray
	for _, d := range n.NICs {
		nics = append(nics, vm.VirtualMachineNetworkDeviceArgs{
			Bridge:     pulumi.String(d.Bridge),
			Model:      pulumi.String("virtio"),
			VlanId:     optionalInt(d.VLANID),
			MacAddress: optionalString(d.MACAddress),
			Mtu:        optionalInt(d.MTU),
		})
	}

	// cloud-init addresses the cluster network (net0) only: enough for the maintenance API, and
	// Talos configures every network once its configuration is applied.
	ipConfig := vm.VirtualMachineInitializationIpConfigArgs{}
	if p.IPv4Address != "" {
		ipConfig.Ipv4 = vm.VirtualMachineInitializationIpConfigIpv4Args{
			Address: pulumi.String(p.IPv4Address), Gateway: optionalString(p.IPv4Gateway),
		}
	}

	if p.IPv6Address != "" {
		ipConfig.Ipv6 = vm.VirtualMachineInitializationIpConfigIpv6Args{
			Address: pulumi.String(p.IPv6Address), Gateway: optionalString(p.IPv6Gateway),
		}
	}

	init := &vm.VirtualMachineInitializationArgs{
		DatastoreId: pulumi.String(n.DatastoreID),
		IpConfigs:   vm.VirtualMachineInitializationIpConfigArray{ipConfig},
	}
	if ns := c.Network.Nameservers; len(ns) > 0 {
		init.Dns = vm.VirtualMachineInitializationDnsArgs{Servers: pulumi.ToStringArray(ns)}
	}

	args := &vm.VirtualMachineArgs{
		Name:            pulumi.String(n.Name),
		NodeName:        pulumi.String(n.HostNode),
		Description:     pulumi.String(p.Description),
		Tags:            pulumi.ToStringArray(withInstance(n.Tags, instance)),
		Machine:         pulumi.String(n.VMMachine),
		Bios:            pulumi.String(n.BIOS),
		ScsiHardware:    pulumi.String(n.SCSIHardware),
		OperatingSystem: vm.VirtualMachineOperatingSystemArgs{Type: pulumi.String("l26")},
		Cpu:             vm.VirtualMachineCpuArgs{Cores: pulumi.Int(n.CPU), Sockets: pulumi.Int(1), Type: pulumi.String(n.CPUType)},
		// Talos does not support memory ballooning: all memory is dedicated.
		Memory:         vm.VirtualMachineMemoryArgs{Dedicated: pulumi.Int(n.MemoryMiB), Floating: pulumi.Int(0)},
		Agent:          agentArgs(p),
		NetworkDevices: nics,
		Disks:          disks,
		Initialization: init,
		OnBoot:         pulumi.Bool(true),
		Started:        pulumi.Bool(true),
		// Talos without the guest agent ignores ACPI shutdown requests slowly; a destroyed
		// node is stopped, not shut down.
		StopOnDestroy: pulumi.Bool(true),
		// An empty CD-ROM drive: the proxmoxve provider's default is the host's physical drive
		// ("cdrom"), which Proxmox lets only users with Sys.Console on / attach (qemu-server's
		// check_storage_access); the nodes boot from their disk.
		Cdrom: vm.VirtualMachineCdromArgs{FileId: pulumi.String("none")},
		VmId:  optionalInt(vmid),
	}

	if len(pcis) > 0 {
		args.Hostpcis = pcis
	}

	if p.EFIDisk {
		args.EfiDisk = vm.VirtualMachineEfiDiskArgs{
			DatastoreId: pulumi.String(n.DatastoreID),
			FileFormat:  pulumi.String("raw"),
			Type:        pulumi.String("4m"),
			// Setup mode: no Microsoft or distribution keys, so a Secure Boot image enrols Talos'
			// own (the factory's images are signed with Sidero Labs' key, which no preset holds).
			PreEnrolledKeys: pulumi.Bool(false),
		}
	}

	if p.TPM {
		args.TpmState = vm.VirtualMachineTpmStateArgs{
			DatastoreId: pulumi.String(n.DatastoreID),
			Version:     pulumi.String("v2.0"),
		}
	}

	return args
}

// agentArgs enables the QEMU guest agent when the image has it. The proxmoxve provider reads the
// agent's interfaces after starting a VM, for up to agent.timeout (15 minutes by default); a Talos
// node in maintenance mode runs no extension, so its agent does not answer until the configuration
// is applied (siderolabs/talos#11651), and that read would hold every create for its whole timeout.
// The component needs nothing from it then (DHCP nodes are found by NodeAddress), and a running
// Talos node's agent answers in milliseconds, so the wait is one second (5 s cost every create 4 s
// more, BenchmarkLabUpSpread).
func agentArgs(p plan.VM) vm.VirtualMachineAgentArgs {
	args := vm.VirtualMachineAgentArgs{Enabled: pulumi.Bool(p.Agent), Trim: pulumi.Bool(p.Agent)}
	if p.Agent {
		args.Timeout = pulumi.String(agentTimeout)
	}

	return args
}

// agentTimeout bounds the proxmoxve provider's read of the guest agent after a VM starts.
const agentTimeout = "1s"

// nodeAddressTimeout bounds the search for a DHCP node's address.
const nodeAddressTimeout = "10m"

// agentAddress picks a node's address from what the QEMU guest agent reports: the first IPv4
// address in the node subnet of the first interface that is not the loopback interface, skipping
// link-local addresses (a node with several networks has addresses in other subnets too, and its
// interfaces are reported in the guest's order, not the VM's). Interface names and address lists
// are parallel, as the proxmoxve provider reports them.
func agentAddress(names []string, addrs [][]string, subnet netip.Prefix) string {
	for i, list := range addrs {
		if i < len(names) && names[i] == "lo" {
			continue
		}

		for _, s := range list {
			a, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil || !a.Is4() || a.IsLinkLocalUnicast() || a.IsUnspecified() || !subnet.Contains(a) {
				continue
			}

			if i >= len(names) && a.IsLoopback() {
				continue
			}

			return a.String()
		}
	}

	return ""
}

// nodeAddress registers the search for a DHCP node's address (lifecycle.NodeAddress): the
// agent's report when it already answered, else a scan of the node subnet for the Talos API of a
// node with the VM's MAC address.
func nodeAddress(s Scope, n spec.Node, machine *vm.VirtualMachine, self Lifecycle) (pulumi.StringOutput, error) {
	gw := netip.MustParseAddr(s.Cluster.Network.Gateway)
	subnet := netip.PrefixFrom(gw, s.Cluster.Network.PrefixLength).Masked()

	in, a := lifecycle.NodeAddressKind.Inputs()
	lifecycle.Set(in, &a.Node, pulumi.String(n.Name))
	lifecycle.Set(in, &a.MacAddress, machine.NetworkDevices.Index(pulumi.Int(0)).MacAddress().Elem())
	lifecycle.Set(in, &a.Subnet, pulumi.String(subnet.String()))
	lifecycle.Set(in, &a.AgentAddress, pulumi.All(machine.NetworkInterfaceNames, machine.Ipv4Addresses).ApplyT(func(v []any) string {
		return agentAddress(v[0].([]string), v[1].([][]string), subnet)
	}).(pulumi.StringOutput))
	lifecycle.Set(in, &a.Timeout, pulumi.String(nodeAddressTimeout))

	res, err := lifecycle.NodeAddressKind.Register(s.Ctx, s.child(n.Name+"-address"), in, s.parent(), self.option)
	if err != nil {
		return pulumi.StringOutput{}, errorf("registering the address search of node %s: %w", n.Name, err)
	}

	return res.Address, nil
}

// withInstance is a VM's tags with its instance tag, sorted as Proxmox keeps them.
func withInstance(tags []string, instance string) []string {
	out := append(slices.Clone(tags), instance)
	slices.Sort(out)

	return out
}

// optionalString is s as an optional input: unset (nil) when s is empty, so the provider's
// default (or Proxmox's) stands.
func optionalString(s string) pulumi.StringPtrInput {
	if s == "" {
		return nil
	}

	return pulumi.String(s)
}

// optionalInt is n as an optional input: unset (nil) when n is 0.
func optionalInt(n int) pulumi.IntPtrInput {
	if n == 0 {
		return nil
	}

	return pulumi.Int(n)
}
