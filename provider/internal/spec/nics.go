package spec

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// NIC is one Proxmox network device of a node's VM (net<index>).
type NIC struct {
	Bridge string
	VLANID int // 0 = untagged
	MTU    int // 0 = the bridge's
	// MACAddress is upper case; empty only on a node's one NIC when Proxmox chooses it.
	MACAddress string
	// Derived: the component derived MACAddress (DeriveMAC); the user gave none.
	Derived bool
}

// Link is what Talos configures over a node's NICs: one NIC, or a bond of several.
type Link struct {
	// Path is the property it comes from: "nodes.<n>" (one NIC) or "nodes.<n>.networks[k]".
	Path string
	// Name is the Talos link name: "net<i>" for NIC i (a link alias from contract v1.12),
	// "bond<k>" for the k-th bond.
	Name string
	// NICs are the indexes of the link's NICs in Node.NICs (the VM's net<i>); one unless a bond.
	NICs []int
	// BondMode is the Linux bond mode ("" when the link is one NIC).
	BondMode string
	MTU      int
	// Cluster marks the cluster network: its addresses are the node's ip and ip6 with the
	// cluster's prefix lengths and gateways, and it carries the VIP. It is always Links[0].
	Cluster   bool
	Addresses []string // static CIDRs (never on the cluster link)
	DHCP      bool     // DHCPv4 (never on the cluster link: network.dhcp)
	Gateway   string   // next hop of Routes
	Routes    []string
}

// MaxNICs is how many network devices a Proxmox VM has (net0 to net31).
const MaxNICs = 32

// MinMTU and MaxMTU bound an MTU: the IPv4 minimum every host must accept, and Proxmox' maximum.
// IPv6 needs MinMTU6.
const (
	MinMTU  = 576
	MaxMTU  = 65520
	MinMTU6 = 1280
)

// BondModes are the Linux bond modes Talos accepts.
var BondModes = []string{"active-backup", "balance-rr", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}

// DeriveMAC is the MAC address of a NIC the user gives none when its node has several (Talos must
// tell them apart): locally administered (02:…), from the cluster, the node, the NIC's segment
// ("<bridge>/<vlan>") and its ordinal there (a bond's NICs share a segment), so removing or adding
// another network, which renumbers the VM's NICs, changes no MAC.
func DeriveMAC(cluster, node, segment string, ordinal int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%s/%d", cluster, node, segment, ordinal))

	return fmt.Sprintf("02:%02X:%02X:%02X:%02X:%02X", sum[0], sum[1], sum[2], sum[3], sum[4])
}

// buildNICs gives node n its NICs and Talos links: one NIC from the node's single-NIC fields, or
// the node's networks (else nodeDefaults.networks), the cluster network first.
func buildNICs(p *problems, path string, in NodeInput, all Input, n *Node, c *Cluster) {
	d := all.NodeDefaults
	single := NIC{Bridge: n.Bridge, VLANID: n.VLANID, MTU: firstInt(in.MTU, d.MTU, 0), MACAddress: n.MACAddress}

	checkMTU(p, path+".mtu", in.MTU, c.Network.IPv6)
	checkMTU(p, "nodeDefaults.mtu", d.MTU, c.Network.IPv6) // reported once (problems)

	entries, from := in.Networks, path+".networks"
	if entries == nil {
		entries, from = d.Networks, "nodeDefaults.networks"
	}

	if len(entries) == 0 {
		n.NICs = []NIC{single}
		n.Links = []Link{{Path: path, Name: "net0", NICs: []int{0}, MTU: single.MTU, Cluster: true}}

		return
	}

	for _, f := range []struct {
		field string
		set   bool
	}{{"bridge", in.Bridge != ""}, {"vlanId", in.VLANID != nil}, {"macAddress", in.MACAddress != ""}, {"mtu", in.MTU != nil}} {
		if f.set {
			p.errorf(path+"."+f.field, "is set together with %s; set it on the cluster network's entry there instead", from)
		}
	}

	cluster := -1
	for i, e := range entries {
		switch {
		case e.ClusterNetwork == nil || !*e.ClusterNetwork:
		case cluster >= 0:
			p.errorf(fmt.Sprintf("%s[%d].clusterNetwork", from, i), "is true on %s[%d] too; mark one network as the cluster network", from, cluster)
		default:
			cluster = i
		}
	}

	if cluster < 0 {
		// None marked: the first that is not marked false.
		cluster = slices.IndexFunc(entries, func(e NetworkDeviceInput) bool { return e.ClusterNetwork == nil })
		if cluster < 0 {
			p.errorf(from+"[0].clusterNetwork", "is false like on every other network, so none carries the cluster network; "+
				"mark one clusterNetwork: true (or leave it unset on the first)")
		}
	}

	cluster = max(cluster, 0)

	order := append([]int{cluster}, slices.DeleteFunc(seq(len(entries)), func(i int) bool { return i == cluster })...)
	segments := map[string]string{}
	bonds := 0

	for _, k := range order {
		e, at := entries[k], fmt.Sprintf("%s[%d]", from, k)
		isCluster := k == cluster
		link := buildLink(p, at, e, isCluster, from == "nodeDefaults.networks", c)
		link.Path = at

		nic := NIC{Bridge: firstString(e.Bridge, n.Bridge), MTU: link.MTU}
		if isCluster {
			nic.VLANID = firstInt(e.VLANID, all.Network.VLANID, 0)
		} else {
			nic.VLANID = firstInt(e.VLANID, 0)
		}

		if e.MACAddress != "" && e.Bond == nil {
			mac, why := normaliseMAC(e.MACAddress)
			if why != "" {
				p.errorf(at+".macAddress", "%q %s", e.MACAddress, why)
			}
			nic.MACAddress = mac
		}

		count := 1
		if e.Bond != nil {
			if count = firstInt(e.Bond.Interfaces, 2); count < 2 || count > 8 {
				count = 2 // reported by buildLink
			}
			link.Name = fmt.Sprintf("bond%d", bonds)
			bonds++
		} else {
			link.Name = fmt.Sprintf("net%d", len(n.NICs))

			segment := fmt.Sprintf("bridge %s, VLAN %d", nic.Bridge, nic.VLANID)
			if other, dup := segments[segment]; dup {
				p.errorf(at, "is on %s like %s: two NICs on one segment give Talos two links into the same network, and "+
					"replies may leave by the other one; bond them (bond: {interfaces: 2}) or use another bridge or VLAN", segment, other)
			}
			segments[segment] = at
		}

		for range count {
			link.NICs = append(link.NICs, len(n.NICs))
			n.NICs = append(n.NICs, nic)
		}

		n.Links = append(n.Links, link)
	}

	if len(n.NICs) > MaxNICs {
		p.errorf(from, "makes %d NICs; a Proxmox VM has at most %d (net0 to net%d)", len(n.NICs), MaxNICs, MaxNICs-1)
	}

	if len(n.NICs) > 1 {
		seen := map[string]int{}

		for i := range n.NICs {
			nic := &n.NICs[i]
			segment := fmt.Sprintf("%s/%d", nic.Bridge, nic.VLANID)
			seen[segment]++

			if nic.MACAddress == "" {
				nic.MACAddress, nic.Derived = DeriveMAC(c.Name, n.Name, segment, seen[segment]), true
			}
		}
	}

	n.Bridge, n.VLANID, n.MACAddress = n.NICs[0].Bridge, n.NICs[0].VLANID, n.NICs[0].MACAddress
}

// buildLink checks one networks entry and returns its link (without name and NICs).
func buildLink(p *problems, at string, e NetworkDeviceInput, cluster, defaults bool, c *Cluster) Link {
	link := Link{Cluster: cluster, DHCP: e.DHCP != nil && *e.DHCP, Gateway: e.Gateway, Routes: slices.Clone(e.Routes)}

	if e.Bridge != "" && !bridgeRe.MatchString(e.Bridge) {
		p.errorf(at+".bridge", "%q is not a Proxmox bridge name; use e.g. \"vmbr1\"", e.Bridge)
	}

	if e.VLANID != nil && (*e.VLANID < 1 || *e.VLANID > 4094) {
		p.errorf(at+".vlanId", "%d is not a VLAN id; use 1 to 4094, or leave it unset for untagged traffic", *e.VLANID)
	}

	var v4, v6 bool

	for i, a := range e.Addresses {
		pfx, err := netip.ParsePrefix(a)
		if err != nil {
			p.errorf(fmt.Sprintf("%s.addresses[%d]", at, i), "%q is not an address in CIDR form; use e.g. \"10.50.0.11/24\" or \"fd00:50::11/64\"", a)
			continue
		}

		v4, v6 = v4 || pfx.Addr().Is4(), v6 || pfx.Addr().Is6()
		link.Addresses = append(link.Addresses, pfx.String())
	}

	ipv6 := v6 || (cluster && c.Network.IPv6)

	if e.Bond != nil {
		link.BondMode = firstString(e.Bond.Mode, "active-backup")
		if !slices.Contains(BondModes, link.BondMode) {
			p.errorf(at+".bond.mode", "%q is not a bond mode; use one of %s", e.Bond.Mode, strings.Join(BondModes, ", "))
		}

		if link.BondMode == "802.3ad" {
			p.warnf(at+".bond.mode", "802.3ad needs a switch that speaks LACP, and a Proxmox bridge does not: the bond's NICs "+
				"share one bridge, so it runs without an aggregator; active-backup or balance-* work on a bridge")
		}

		if n := e.Bond.Interfaces; n != nil && (*n < 2 || *n > 8) {
			p.errorf(at+".bond.interfaces", "%d: a bond joins 2 to 8 NICs; a bond over one NIC adds nothing but a link, so "+
				"drop bond for one NIC or set 2 or more", *n)
		}

		if e.MTU != nil {
			p.errorf(at+".mtu", "is set on a bond; set bond.mtu, the MTU of the bond and of its NICs")
		}

		if e.MACAddress != "" {
			p.errorf(at+".macAddress", "is set on a bond of several NICs; each NIC gets a MAC derived from the cluster, node and index")
		}

		checkMTU(p, at+".bond.mtu", e.Bond.MTU, ipv6)
		link.MTU = firstInt(e.Bond.MTU, 0)
	} else {
		checkMTU(p, at+".mtu", e.MTU, ipv6)
		link.MTU = firstInt(e.MTU, 0)
	}

	if cluster {
		for _, f := range []struct {
			field string
			set   bool
		}{{"addresses", len(e.Addresses) > 0}, {"dhcp", e.DHCP != nil}, {"gateway", e.Gateway != ""}, {"routes", len(e.Routes) > 0}} {
			if f.set {
				p.errorf(at+"."+f.field, "is set on the cluster network, which is addressed by the node's ip and ip6 and by network "+
					"(gateway, gateway6, dhcp); remove it, or mark another network clusterNetwork: true")
			}
		}

		return link
	}

	if defaults && (len(e.Addresses) > 0 || e.MACAddress != "") {
		p.errorf(at, "holds addresses or a macAddress, which are each node's own; set them in nodes.<name>.networks")
	}

	checkRoutes(p, at, e, link.Addresses)

	return link
}

// checkRoutes checks a network's gateway and routes: both or neither, the gateway inside one
// of the network's subnets, routes as CIDRs.
func checkRoutes(p *problems, at string, e NetworkDeviceInput, addresses []string) {
	switch {
	case e.Gateway != "" && len(e.Routes) == 0:
		p.errorf(at+".gateway", "is set without routes; the cluster network holds the default route, so list the networks "+
			"reached through this gateway in routes, e.g. [\"10.60.0.0/16\"]")
	case e.Gateway == "" && len(e.Routes) > 0:
		p.errorf(at+".routes", "need a gateway; set gateway to the next hop, inside one of addresses' subnets")
	}

	gw, gwErr := netip.ParseAddr(e.Gateway)

	for i, r := range e.Routes {
		pfx, err := netip.ParsePrefix(r)

		switch {
		case err != nil:
			p.errorf(fmt.Sprintf("%s.routes[%d]", at, i), "%q is not a CIDR; use e.g. \"10.60.0.0/16\"", r)
		case pfx.Bits() == 0:
			p.errorf(fmt.Sprintf("%s.routes[%d]", at, i), "%s is a default route, which the cluster network holds; list the "+
				"networks reached through this gateway", r)
		case gwErr == nil && pfx.Addr().Is4() != gw.Is4():
			p.errorf(fmt.Sprintf("%s.routes[%d]", at, i), "%s is of another family than the gateway %s; the kernel refuses such a "+
				"route, so route it through a gateway of its family (one family per network's routes)", r, e.Gateway)
		}
	}

	if e.Gateway == "" {
		return
	}

	if gwErr != nil {
		p.errorf(at+".gateway", "%q is not an IP address; use e.g. \"10.50.0.1\"", e.Gateway)
		return
	}

	if e.DHCP != nil && *e.DHCP && len(addresses) == 0 {
		return // the subnet comes from the DHCP server
	}

	for _, a := range addresses {
		if pfx := netip.MustParsePrefix(a); pfx.Masked().Contains(gw) {
			return
		}
	}

	p.errorf(at+".gateway", "%s is outside every subnet of this network's addresses (%s); a next hop must be on the link, so "+
		"use an address in one of them", e.Gateway, strings.Join(addresses, ", "))
}

// checkMTU reports an MTU out of range: below the IPv4 minimum (or IPv6's 1280 when the link
// carries IPv6) or above Proxmox' maximum.
func checkMTU(p *problems, path string, mtu *int, ipv6 bool) {
	if mtu == nil {
		return
	}

	lowest, why := MinMTU, ""
	if ipv6 {
		lowest, why = MinMTU6, " (IPv6 needs 1280)"
	}

	if *mtu < lowest || *mtu > MaxMTU {
		p.errorf(path, "%d is not an MTU for this link; use %d to %d%s, e.g. 1500, or 9000 for jumbo frames", *mtu, lowest, MaxMTU, why)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}

	return out
}
