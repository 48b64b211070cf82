package proxmox

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// AdoptedTag marks a VM the component adopted (imported, not created): it keeps the settings it
// was made with that the component does not declare (firmware, CPU type, cloud-init, …), and its
// node was configured before the component knew it. The tag lives on the VM, like the instance
// tag, so every later `up` knows it without the stack's state.
const AdoptedTag = "talos-adopted"

// Adoptee is a declared node's VM that exists and that the component did not create: the VM of
// a cluster made by Terraform, talosctl or another program, taken over by the component, or one
// it took over before (AdoptedTag).
type Adoptee struct {
	Node string
	Host string
	VMID int
	// Import is true until the VM carries the component's tags: it has no instance tag yet, so
	// this `up` imports it (the first adopting `up`), or the tags were lost (the old tool applied
	// its own again). Either way the VM is registered with the same import id every time (see
	// ImportID), so the engine imports it once and updates it after.
	Import bool
	// Tags are the VM's own tags, kept beside the component's (the old tool's, say), without
	// its instance tag and AdoptedTag.
	Tags []string
}

// ImportID is the VM's id for the proxmoxve provider's import: "<host>/<vmid>". An adopted VM is
// registered with it on every `up`, not only the first: the engine keeps the import id of the
// last registration in the state and compares it with the next one's, and an id that differs
// from the state's (none there) would import the VM again over the one in the state — a
// replacement that deletes the VM it just imported. The host is the node's hostNode, which an
// adopted VM keeps (AdopteeProblems refuses any other).
func (a Adoptee) ImportID() string { return fmt.Sprintf("%s/%d", a.Host, a.VMID) }

// Adoptees are the declared nodes whose VMs exist without having been created by the component,
// by node name: a node's VM is the VM with its vmId, else the VM named like the node on its
// hostNode. A VM made by the component (tagged with the cluster and an instance) is not one; a
// VM adopted before (AdoptedTag) is, without Import. Only clusters with secrets.bundle adopt;
// without it such VMs are refused as taken (see problems).
func (inv *Inventory) Adoptees(c *spec.Cluster) map[string]Adoptee {
	if inv == nil || c == nil || c.Secrets == nil || len(inv.Nodes) == 0 {
		return nil
	}

	out := map[string]Adoptee{}

	for _, n := range c.Nodes {
		v, ok := inv.vmOf(c.Name, n)
		if !ok {
			continue
		}

		adopted := slices.Contains(v.Tags, AdoptedTag)
		if !adopted && isOwnVM(c.Name, v.Tags) && slices.ContainsFunc(v.Tags, isInstanceTag) {
			continue // the component made it
		}

		own := slices.DeleteFunc(slices.Clone(v.Tags), func(t string) bool { return isInstanceTag(t) || t == AdoptedTag })
		out[n.Name] = Adoptee{Node: n.Name, Host: v.NodeName, VMID: v.VmId, Import: !slices.ContainsFunc(v.Tags, isInstanceTag), Tags: own}
	}

	return out
}

// vmOf is node n's VM: the one with its vmId, else the one with its name on its hostNode. A VM
// another cluster of the component made (an instance tag, not this cluster's name) is never one:
// adopting it would take a running node from that cluster.
func (inv *Inventory) vmOf(cluster string, n spec.Node) (vm.GetVirtualMachinesVm, bool) {
	i := slices.IndexFunc(inv.VMs, func(v vm.GetVirtualMachinesVm) bool {
		if (v.Template != nil && *v.Template) || othersVM(cluster, v.Tags) {
			return false
		}

		if n.VMID != 0 {
			return v.VmId == n.VMID
		}

		return v.Name == n.Name && v.NodeName == n.HostNode
	})
	if i < 0 {
		return vm.GetVirtualMachinesVm{}, false
	}

	return inv.VMs[i], true
}

// othersVM tells a VM another cluster of the component made: an instance tag without the
// cluster's name.
func othersVM(cluster string, tags []string) bool {
	return slices.ContainsFunc(tags, isInstanceTag) && !slices.Contains(tags, cluster)
}

func isInstanceTag(t string) bool { return strings.HasPrefix(t, instancePrefix) }

// AdopteeProblems are the adopted nodes the component cannot keep as they are declared, on every
// `up` (not only the one that imports them): a VM on another host than hostNode (moving it would
// replace it), or a node without a static address (a running node is reached at the address it
// has).
func AdopteeProblems(c *spec.Cluster, adoptees map[string]Adoptee) []error {
	var errs []error

	for _, n := range c.Nodes {
		a, ok := adoptees[n.Name]
		if !ok {
			continue
		}

		if a.Host != n.HostNode {
			errs = append(errs, fmt.Errorf("nodes.%s.hostNode: the adopted VM %d runs on %s, not %s; set hostNode: %s "+
				"(the component never moves an adopted VM: on another host the proxmoxve provider would create a new VM and "+
				"delete this one, with its disks; migrate it back in Proxmox, or remove the node and add one)", n.Name, a.VMID, a.Host, n.HostNode, a.Host))
		}

		switch {
		case c.Network.DHCP:
			errs = append(errs, fmt.Errorf("network.dhcp: adopting the running node %s (VM %d) needs the address it has; set "+
				"network.dhcp: false and each node's ip to its address (reserve it in your DHCP server)", n.Name, a.VMID))
		case n.IP == "":
			errs = append(errs, fmt.Errorf("nodes.%s.ip: adopting the running node of VM %d needs the address it has; set ip "+
				"to the node's address", n.Name, a.VMID))
		}
	}

	return errs
}

// VMDifferences compares an adopted VM's configuration (as Proxmox returns it) with the node's
// declared VM: what the first `up` changes in place, each said with its effect, and what it
// refuses to change because it would lose data (a smaller disk; a disk the node does not declare).
// Settings the component does not expose (firmware, CPU type, cloud-init, …) are kept as they are
// and not compared.
func VMDifferences(p plan.VM, cfg map[string]string) (changes []string, refused []error) {
	n := p.Node
	at := "nodes." + n.Name

	if got := cfg["name"]; got != n.Name {
		changes = append(changes, fmt.Sprintf("name %q → %q (in place)", got, n.Name))
	}

	intOf := func(key string, def int) int {
		v, err := strconv.Atoi(cfg[key])
		if err != nil {
			return def
		}

		return v
	}

	if got := intOf("cores", 1); got != n.CPU {
		changes = append(changes, fmt.Sprintf("cpu %d → %d cores (in place; the VM is rebooted by the proxmoxve provider to apply it)", got, n.CPU))
	}

	if got := intOf("memory", 512); got != n.MemoryMiB {
		changes = append(changes, fmt.Sprintf("memory %d → %d MiB (in place; the VM is rebooted by the proxmoxve provider to apply it)", got, n.MemoryMiB))
	}

	declared := map[string]bool{}

	for i, d := range p.Disks {
		declared[d.Interface] = true
		path := at + ".diskSizeGib"
		if i > 0 {
			path = fmt.Sprintf("%s.dataDisks[%d].sizeGib", at, i-1)
		}

		store, size, ok := parseDisk(cfg[d.Interface])

		switch {
		case !ok:
			changes = append(changes, fmt.Sprintf("disk %s: added, %d GiB on %s (in place)", d.Interface, d.SizeGiB, d.DatastoreID))
		case size > d.SizeGiB:
			refused = append(refused, fmt.Errorf("%s: VM %s's disk %s has %d GiB; %d GiB would shrink it, which Proxmox cannot do "+
				"without losing data; declare %d", path, cfg["name"], d.Interface, size, d.SizeGiB, size))
		default:
			if size < d.SizeGiB {
				changes = append(changes, fmt.Sprintf("disk %s %d → %d GiB (grown in place)", d.Interface, size, d.SizeGiB))
			}

			if store != d.DatastoreID {
				changes = append(changes, fmt.Sprintf("disk %s moves from %s to %s (in place; the VM is stopped for the move by the "+
					"proxmoxve provider and started again)", d.Interface, store, d.DatastoreID))
			}
		}
	}

	for _, key := range sortedKeys(cfg) {
		if diskKey.MatchString(key) && !declared[key] && !strings.Contains(cfg[key], "media=cdrom") && !strings.Contains(cfg[key], "cloudinit") {
			refused = append(refused, fmt.Errorf("%s: VM %s has disk %s (%s) that the node does not declare; the component would "+
				"remove it with its data; declare it in %s.dataDisks (they are scsi1, scsi2, … in order; a VM whose disks are on "+
				"another bus than SCSI cannot be adopted yet)", at, cfg["name"], key, cfg[key], at))
		}
	}

	nics := n.NICs
	if len(nics) == 0 {
		nics = []spec.NIC{{Bridge: n.Bridge, VLANID: n.VLANID, MACAddress: n.MACAddress}}
	}

	for i, nic := range nics {
		key := fmt.Sprintf("net%d", i)

		for _, d := range nicDifferences(nic, cfg[key]) {
			if i > 0 {
				d = key + ": " + d
			}

			changes = append(changes, d)
		}

		// A MAC the component derived would replace the one the node's NIC has, and the
		// configuration selects NICs by it: the node keeps its own when told to.
		if mac := nicMAC(cfg[key]); i > 0 && mac != "" && !strings.EqualFold(mac, nic.MACAddress) {
			refused = append(refused, fmt.Errorf("%s: VM %s's %s has MAC %s; declare it (macAddress: %q on that network) so the "+
				"adopted node keeps it", at, cfg["name"], key, mac, mac))
		}
	}

	// The proxmoxve provider removes what the VM has and the node does not declare.
	declaredPCI := map[string]bool{}
	for _, h := range p.Hostpcis {
		declaredPCI[h.Device] = true
	}

	for _, key := range sortedKeys(cfg) {
		switch {
		case nicKey.MatchString(key) && nicIndex(key) >= len(nics):
			refused = append(refused, fmt.Errorf("%s: VM %s has network device %s (%s), which the node does not declare and the "+
				"component would remove; declare it in %s.networks (net0 is the cluster network, the others follow in order)",
				at, cfg["name"], key, cfg[key], at))
		case pciKey.MatchString(key) && !declaredPCI[key]:
			refused = append(refused, fmt.Errorf("%s: VM %s has the PCI device %s (%s), which the node does not declare and the component "+
				"would remove (with a reboot); declare it in %s.pciDevices (in slot order)", at, cfg["name"], key, cfg[key], at))
		}
	}

	return changes, refused
}

var (
	nicKey = regexp.MustCompile(`^net\d+$`)
	pciKey = regexp.MustCompile(`^hostpci\d+$`)
)

var diskKey = regexp.MustCompile(`^(scsi|virtio|sata|ide)\d+$`)

// parseDisk reads "local-lvm:vm-104-disk-0,discard=on,size=20G" into its datastore and size in GiB.
func parseDisk(v string) (store string, gib int, ok bool) {
	if v == "" {
		return "", 0, false
	}

	parts := strings.Split(v, ",")
	store, _, _ = strings.Cut(parts[0], ":")

	for _, p := range parts[1:] {
		if s, found := strings.CutPrefix(p, "size="); found {
			gib = sizeGiB(s)
		}
	}

	return store, gib, true
}

// sizeGiB reads a Proxmox size ("20G", "512M", "1T") in whole GiB.
func sizeGiB(s string) int {
	unit := map[byte]float64{'K': 1.0 / (1 << 20), 'M': 1.0 / 1024, 'G': 1, 'T': 1024}

	if s == "" {
		return 0
	}

	mul, ok := unit[s[len(s)-1]]
	if !ok {
		mul, s = 1.0/(1<<30), s+"B"
	}

	f, err := strconv.ParseFloat(s[:len(s)-1], 64)
	if err != nil {
		return 0
	}

	return int(f * mul)
}

// nicIndex is i of "net<i>".
func nicIndex(key string) int {
	i, _ := strconv.Atoi(strings.TrimPrefix(key, "net"))

	return i
}

// nicMAC is the MAC of a NIC's value ("virtio=BC:24:11:…,bridge=vmbr0").
func nicMAC(value string) string {
	_, mac, _ := strings.Cut(strings.Split(value, ",")[0], "=")

	return mac
}

// nicDifferences compares a VM's NIC ("virtio=BC:24:11:…,bridge=vmbr0,tag=5,mtu=9000") with the
// node's.
func nicDifferences(n spec.NIC, value string) []string {
	var model, mac, bridge string

	vlan, mtu := 0, 0

	for i, p := range strings.Split(value, ",") {
		k, v, _ := strings.Cut(p, "=")

		switch {
		case i == 0:
			model, mac = k, v
		case k == "bridge":
			bridge = v
		case k == "tag":
			vlan, _ = strconv.Atoi(v)
		case k == "mtu":
			mtu, _ = strconv.Atoi(v)
		}
	}

	var out []string

	if model == "" {
		return append(out, fmt.Sprintf("network device added on %s (in place)", n.Bridge))
	}

	if bridge != n.Bridge {
		out = append(out, fmt.Sprintf("bridge %s → %s (in place)", bridge, n.Bridge))
	}

	if vlan != n.VLANID {
		out = append(out, fmt.Sprintf("vlan %d → %d (in place)", vlan, n.VLANID))
	}

	if n.MACAddress != "" && !strings.EqualFold(mac, n.MACAddress) {
		out = append(out, fmt.Sprintf("MAC %s → %s (in place; the node's address may change with it)", mac, n.MACAddress))
	}

	if n.MTU != 0 && mtu != n.MTU {
		out = append(out, fmt.Sprintf("mtu %d → %d (in place)", mtu, n.MTU))
	}

	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}

	slices.Sort(keys)

	return keys
}

// ReadAdoptees reads the configuration of each VM to import (Proxmox' own, through the API) and
// compares it with the node's declared VM: the changes the adopting `up` makes, by node, and the
// problems that refuse it.
func ReadAdoptees(ctx *pulumi.Context, opts []pulumi.ResourceOption, c *spec.Cluster, p *plan.Plan, adoptees map[string]Adoptee) (map[string][]string, []error) {
	changes := map[string][]string{}

	var errs []error

	api, err := pveclient.New(proxmoxCredentials(ctx, opts))
	if err != nil {
		return nil, []error{fmt.Errorf("the VMs to adopt are read through the Proxmox API, which the component cannot reach with "+
			"the proxmoxve provider's credentials: %w; check proxmoxve:endpoint and proxmoxve:apiToken", err)}
	}

	for _, v := range p.VMs {
		a, ok := adoptees[v.Node.Name]
		if !ok || !a.Import {
			continue
		}

		cfg, err := api.VMConfig(ctx.Context(), a.Host, a.VMID)
		if err != nil {
			errs = append(errs, fmt.Errorf("nodes.%s: reading the configuration of VM %d on %s to adopt it: %w", v.Node.Name, a.VMID, a.Host, err))
			continue
		}

		c, refused := VMDifferences(v, cfg)
		changes[v.Node.Name] = c
		errs = append(errs, refused...)
	}

	return changes, errs
}

// AdoptedWithoutBundle is the refusal of a cluster whose VMs were adopted and whose declaration
// no longer gives secrets.bundle: without it the component would generate new secrets, and every
// node's configuration would change to a PKI the cluster does not have.
func (inv *Inventory) AdoptedWithoutBundle(c *spec.Cluster) error {
	if inv == nil || c == nil || c.Secrets != nil {
		return nil
	}

	for _, n := range c.Nodes {
		for _, v := range ownVMs(c.Name, n.Name, inv.VMs) {
			if slices.Contains(v.Tags, AdoptedTag) {
				return fmt.Errorf("secrets.bundle: this cluster was adopted with its secrets bundle (VM %d of %s is tagged %s); "+
					"keep secrets.bundle: without it the component would generate new secrets and reconfigure every node "+
					"with a PKI the cluster does not have", v.VmId, n.Name, AdoptedTag)
			}
		}
	}

	return nil
}

// BundleCheckNode is a control plane of a running cluster (made by the component or adopted by it
// before) to check secrets.bundle against on every `up`: a bundle of other secrets would
// reconfigure every node with a PKI the cluster does not have. None when the cluster is new, has
// no bundle, or the bundle is not known yet.
func (inv *Inventory) BundleCheckNode(c *spec.Cluster) (spec.Node, bool) {
	if inv == nil || c == nil || c.Secrets == nil || !c.Secrets.Known {
		return spec.Node{}, false
	}

	for _, n := range c.ControlPlanes() {
		if len(ownVMs(c.Name, n.Name, inv.VMs)) > 0 && n.IP != "" {
			return n, true
		}
	}

	return spec.Node{}, false
}
