package talosemu

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ryanuber/go-glob"
	networkpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/network"
	"github.com/siderolabs/talos/pkg/machinery/cel/celenv"
	"github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/proto"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
)

// The node's network as Talos makes it from the VM's NICs, the cloud-init (nocloud platform)
// configuration and the machine configuration, read through machinery's accessors:
//
//   - Links: lo, then eth0, eth1, … for the NICs (driver virtio_net, MTU the NIC's), and the
//     bonds the configuration declares (kind "bond", the hardware address of their first member,
//     members with masterIndex and slaveKind "bond").
//   - Up to contract v1.11, machine.network.interfaces (Talos' DeviceConfigController): a
//     deviceSelector applies the device to every link it matches (glob on the hardware address,
//     case-sensitive: Talos prints MACs in lower case), none leaves it without a link; a bond's
//     deviceSelectors pick its members, a selector matching nothing drops that member, none at all
//     drops the bond.
//   - From contract v1.12, LinkAliasConfig names a physical link whose CEL selector matches exactly
//     one (several: none named, Talos' "link selector matched multiple links, skipping");
//     LinkConfig, BondConfig, DHCPv4Config… name links by name or alias, as Talos resolves them.
//   - Addresses land on the link named, if it exists; cloud-init's stay on their NIC's link
//     (Talos' platform layer; the address merge keeps every address of every layer).
//   - An MTU above what the link can carry (a physical link's NIC MTU, a bond's smallest member's)
//     leaves the link at its MTU, as the kernel refuses it.
//   - A VIP lands on its link on the control plane the cluster elects (see Cluster.vipHolder).
//
// Not emulated: routes, VLANs, bridges, Wireguard, DHCP leases on links other than the one
// cloud-init leased (the lab runs no DHCP server elsewhere), link up/down.

// netLink is one link of the node.
type netLink struct {
	name     string
	index    uint32
	alias    string
	kind     string // "" (physical or lo) or "bond"
	hw, perm net.HardwareAddr
	mtu      int
	maxMTU   int
	master   uint32 // the bond's index, for a bond member
	bondMode nethelpers.BondMode
	nic      int // index in the NICs, -1 for lo and bonds
}

func (l *netLink) physical() bool { return l.nic >= 0 }

// netAddress is one address on a link.
type netAddress struct {
	link   string
	prefix netip.Prefix
}

// vipDecl is a VIP the configuration declares, with the link it resolved to ("" if none).
type vipDecl struct {
	ip   netip.Addr
	link string
}

// netModel is the node's network.
type netModel struct {
	links []*netLink
	addrs []netAddress // without VIPs
	vips  []vipDecl
}

// buildNetwork is the network of a node with nics running cfg (nil: maintenance mode).
func buildNetwork(nics []NIC, cfg config.Config) *netModel {
	m := &netModel{links: []*netLink{{name: "lo", index: 1, mtu: 65536, maxMTU: 65536, nic: -1}}}

	for i, c := range nics {
		mac, _ := net.ParseMAC(c.MAC)
		m.links = append(m.links, &netLink{
			name: fmt.Sprintf("eth%d", i), index: uint32(2 + i), hw: mac, perm: mac,
			mtu: c.maxMTU(), maxMTU: c.maxMTU(), nic: i,
		})
	}

	if cfg != nil {
		m.aliases(cfg.NetworkLinkAliasConfigs())

		if cfg.Machine() != nil {
			m.devices(cfg.Machine().Network().Devices())
		}

		m.documents(cfg)
	}

	for i, c := range nics {
		for _, p := range c.Addresses {
			m.addAddress(fmt.Sprintf("eth%d", i), p)
		}
	}

	return m
}

// link finds a link by name, then by alias (Talos' resolveLinkName).
func (m *netModel) link(name string) *netLink {
	if name == "" {
		return nil
	}

	for _, l := range m.links {
		if l.name == name {
			return l
		}
	}

	for _, l := range m.links {
		if l.alias == name {
			return l
		}
	}

	return nil
}

func (m *netModel) addAddress(link string, p netip.Prefix) {
	l := m.link(link)
	if l == nil || !p.IsValid() {
		return
	}

	a := netAddress{link: l.name, prefix: p}
	if !slices.Contains(m.addrs, a) {
		m.addrs = append(m.addrs, a)
	}
}

// setMTU gives l the MTU asked for, if it can carry it.
func (m *netModel) setMTU(l *netLink, mtu int) {
	if l == nil || mtu <= 0 {
		return
	}

	if l.kind == "bond" {
		for _, member := range m.links {
			if member.master == l.index && mtu > member.maxMTU {
				return // the member refuses it, so the bond keeps its MTU
			}
		}

		l.mtu = mtu

		for _, member := range m.links {
			if member.master == l.index {
				member.mtu = mtu
			}
		}

		return
	}

	if mtu <= l.maxMTU {
		l.mtu = mtu
	}
}

// bond creates bond name over members (those that exist and are in no bond yet).
func (m *netModel) bond(name string, members []string, mode nethelpers.BondMode) *netLink {
	if existing := m.link(name); existing != nil {
		if existing.kind == "bond" {
			return existing
		}

		return nil
	}

	b := &netLink{name: name, index: uint32(len(m.links) + 1), kind: "bond", mtu: 1500, maxMTU: 65535, bondMode: mode, nic: -1}

	for _, name := range members {
		member := m.link(name)
		if member == nil || !member.physical() || member.master != 0 {
			continue
		}

		member.master = b.index
		member.mtu = b.mtu

		if b.hw == nil {
			b.hw = slices.Clone(member.hw)
		}
	}

	m.links = append(m.links, b)

	return b
}

// devices applies machine.network.interfaces (v1alpha1, contracts up to v1.11).
func (m *netModel) devices(devices []config.Device) {
	// Bonds first: selectors of the other devices see them, as Talos' do once they exist.
	for _, d := range devices {
		if d.Ignore() || d.Bond() == nil || d.Selector() != nil {
			continue
		}

		members := slices.Clone(d.Bond().Interfaces())
		for _, sel := range d.Bond().Selectors() {
			for _, l := range m.selectLinks(sel) {
				if l.name != d.Interface() {
					members = append(members, l.name)
				}
			}
		}

		if len(members) == 0 {
			continue // "no matching network device for defined bond selectors"
		}

		mode, _ := nethelpers.BondModeByName(d.Bond().Mode())
		m.bond(d.Interface(), members, mode)
	}

	for _, d := range devices {
		if d.Ignore() {
			continue
		}

		names := []string{d.Interface()}
		if d.Selector() != nil {
			names = nil
			for _, l := range m.selectLinks(d.Selector()) {
				names = append(names, l.name)
			}
		}

		for _, name := range names {
			l := m.link(name)
			if l == nil {
				continue
			}

			m.setMTU(l, d.MTU())

			for _, a := range d.Addresses() {
				m.addAddress(l.name, parseIPOrPrefix(a))
			}

			if vip := d.VIPConfig(); vip != nil {
				if ip, err := netip.ParseAddr(vip.IP()); err == nil {
					m.vips = append(m.vips, vipDecl{ip: ip, link: l.name})
				}
			}
		}
	}
}

// documents applies the network documents (contract v1.12 on).
func (m *netModel) documents(cfg config.Config) {
	links := cfg.NetworkCommonLinkConfigs()

	for _, lc := range links {
		if bc, ok := lc.(config.NetworkBondConfig); ok {
			m.bond(bc.Name(), bc.Links(), bc.Mode())
		}
	}

	for _, lc := range links {
		l := m.link(lc.Name())
		if l == nil {
			continue
		}

		if mtu, ok := lc.MTU().Get(); ok {
			m.setMTU(l, int(mtu))
		}

		for _, a := range lc.Addresses() {
			m.addAddress(l.name, a.Address())
		}
	}

	for _, v := range cfg.NetworkVirtualIPConfigs() {
		d := vipDecl{ip: v.VIP()}
		if l := m.link(v.Link()); l != nil {
			d.link = l.name
		}

		m.vips = append(m.vips, d)
	}
}

// selectLinks is Talos' DeviceConfigController.selectDevices: the links whose fields glob-match
// every field the selector sets (and that are physical, if it says so).
func (m *netModel) selectLinks(sel config.NetworkDeviceSelector) []*netLink {
	var out []*netLink

	for _, l := range m.links {
		if l.name == "lo" {
			continue
		}

		st := linkStatusSpec(l)
		match, set := true, false

		for _, pair := range [][2]string{
			{sel.HardwareAddress(), st.HardwareAddr.String()},
			{sel.PermanentAddress(), st.PermanentAddr.String()},
			{sel.PCIID(), st.PCIID},
			{sel.KernelDriver(), st.Driver},
			{sel.Bus(), st.BusPath},
		} {
			if pair[0] == "" {
				continue
			}

			set = true
			if !glob.Glob(pair[0], pair[1]) {
				match = false

				break
			}
		}

		if p := sel.Physical(); p != nil && match {
			match, set = *p == st.Physical(), true
		}

		if set && match {
			out = append(out, l)
		}
	}

	return out
}

// aliases is Talos' LinkAliasConfigController: physical links sorted by MAC, configurations by
// name; a fixed name needs exactly one match, a pattern ("net%d") names every match in order; a
// link keeps the first alias it gets.
func (m *netModel) aliases(configs []config.NetworkLinkAliasConfig) {
	var physical []*netLink

	for _, l := range m.links {
		if l.physical() {
			physical = append(physical, l)
		}
	}

	slices.SortStableFunc(physical, func(a, b *netLink) int { return bytes.Compare(a.perm, b.perm) })
	slices.SortStableFunc(configs, func(a, b config.NetworkLinkAliasConfig) int { return strings.Compare(a.Name(), b.Name()) })

	for _, lac := range configs {
		var matched []*netLink

		for _, l := range physical {
			var spec networkpb.LinkStatusSpec
			if err := proto.ResourceSpecToProto(linkStatus(l), &spec); err != nil {
				continue
			}

			ok, err := lac.LinkSelector().EvalBool(celenv.LinkLocator(), map[string]any{"link": &spec})
			if err == nil && ok {
				matched = append(matched, l)
			}
		}

		if len(matched) > 1 && !lac.IsPatternAlias() {
			continue // "link selector matched multiple links, skipping"
		}

		matched = slices.DeleteFunc(matched, func(l *netLink) bool { return l.alias != "" })

		for i, l := range matched {
			if lac.IsPatternAlias() {
				l.alias = strings.Replace(lac.Name(), "%d", strconv.Itoa(i), 1)
			} else if i == 0 {
				l.alias = lac.Name()
			}
		}
	}
}

// linkStatusSpec is what Talos reports of l.
func linkStatusSpec(l *netLink) network.LinkStatusSpec {
	s := network.LinkStatusSpec{
		Alias: l.alias, Index: l.index, Type: nethelpers.LinkEther, MTU: uint32(l.mtu),
		HardwareAddr: nethelpers.HardwareAddr(l.hw), PermanentAddr: nethelpers.HardwareAddr(l.perm),
		BroadcastAddr:    nethelpers.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		OperationalState: nethelpers.OperStateUp, LinkState: true, Kind: l.kind, MasterIndex: l.master,
		Flags:     nethelpers.LinkFlags(nethelpers.LinkUp | nethelpers.LinkBroadcast | nethelpers.LinkRunning | nethelpers.LinkMulticast | nethelpers.LinkLowerUp),
		QueueDisc: "pfifo_fast",
	}

	switch {
	case l.name == "lo":
		s.Type, s.OperationalState, s.QueueDisc = nethelpers.LinkLoopbck, nethelpers.OperStateUnknown, "noqueue"
		s.HardwareAddr, s.PermanentAddr, s.BroadcastAddr = make(nethelpers.HardwareAddr, 6), nil, make(nethelpers.HardwareAddr, 6)
		s.Flags = nethelpers.LinkFlags(nethelpers.LinkUp | nethelpers.LinkLoopback | nethelpers.LinkRunning | nethelpers.LinkLowerUp)
	case l.kind == "bond":
		s.BondMaster.Mode, s.QueueDisc = l.bondMode, "noqueue"
		s.Flags |= nethelpers.LinkFlags(nethelpers.LinkMaster)
	default:
		// A virtio NIC in a Proxmox VM: net0 sits at PCI slot 0x12 (Talos names it ens18).
		s.Driver, s.DriverVersion, s.PCIID = "virtio_net", "1.0.0", "1AF4:1000"
		s.Vendor, s.Product = "Red Hat, Inc.", "Virtio network device"
		s.BusPath = fmt.Sprintf("0000:00:%02x.0", 0x12+l.nic)
	}

	if l.master != 0 {
		s.SlaveKind = "bond"
		s.Flags |= nethelpers.LinkFlags(nethelpers.LinkSlave)
	}

	return s
}

func linkStatus(l *netLink) *network.LinkStatus {
	r := network.NewLinkStatus(network.NamespaceName, l.name)
	*r.TypedSpec() = linkStatusSpec(l)

	return r
}

// parseIPOrPrefix is Talos' parseIPOrIPPrefix: an address without a prefix length is a host one.
func parseIPOrPrefix(s string) netip.Prefix {
	if strings.Contains(s, "/") {
		p, _ := netip.ParsePrefix(s)

		return p
	}

	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}
	}

	return netip.PrefixFrom(a, a.BitLen())
}
