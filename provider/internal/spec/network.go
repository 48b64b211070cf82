package spec

import (
	"fmt"
	"net/netip"
	"slices"
)

// MinScanPrefix is the shortest node prefix DHCP allows: its subnet is scanned for new nodes.
const MinScanPrefix = 20

func buildNetwork(p *problems, in Input, c *Cluster) {
	n := in.Network
	out := Network{
		Gateway:        n.Gateway,
		PrefixLength:   Defaults.PrefixLength,
		Nameservers:    slices.Clone(n.Nameservers),
		NTPServers:     slices.Clone(n.NTPServers),
		DHCP:           n.DHCP != nil && *n.DHCP,
		PodSubnets:     n.PodSubnets,
		ServiceSubnets: n.ServiceSubnets,
		DNSDomain:      n.DNSDomain,
		PrefixLength6:  firstInt(n.PrefixLength6, 64),
		Gateway6:       n.Gateway6,
	}

	// The families the nodes are addressed in: IPv4 (ip or DHCP) unless no node has an ip and
	// there is no IPv4 gateway (IPv6-only); IPv6 when nodes have ip6.
	anyIP, anyIP6 := false, false
	for _, node := range in.Nodes {
		anyIP, anyIP6 = anyIP || node.IP != "", anyIP6 || node.IP6 != ""
	}

	out.IPv6 = anyIP6
	ipv6Only := anyIP6 && !anyIP && n.Gateway == "" && !out.DHCP
	out.IPv4 = !ipv6Only

	// The default ranges: one per family the nodes have.
	for _, r := range []struct {
		out             *[]string
		declared        []string
		default4, dflt6 []string
	}{
		{&out.PodSubnets, n.PodSubnets, Defaults.PodSubnets, Defaults.PodSubnets6},
		{&out.ServiceSubnets, n.ServiceSubnets, Defaults.ServiceSubnets, Defaults.ServiceSubnets6},
	} {
		if r.declared != nil {
			*r.out = slices.Clone(r.declared)
			continue
		}

		*r.out = nil
		if out.IPv4 {
			*r.out = append(*r.out, r.default4...)
		}

		if out.IPv6 {
			*r.out = append(*r.out, r.dflt6...)
		}
	}

	if out.DNSDomain == "" {
		out.DNSDomain = Defaults.DNSDomain
	} else if !isDNSSubdomain(out.DNSDomain) {
		p.errorf("network.dnsDomain", "%q is not a DNS domain; use e.g. \"cluster.local\"", out.DNSDomain)
	}

	if n.PrefixLength != nil {
		out.PrefixLength = *n.PrefixLength
		if out.PrefixLength < 1 || out.PrefixLength > 32 {
			p.errorf("network.prefixLength", "%d is not an IPv4 prefix length; use 1 to 32, e.g. 24 for a /24", out.PrefixLength)
		}
	}

	switch {
	case !out.IPv4:
	case n.Gateway == "" && !out.DHCP:
		p.errorf("network.gateway", "is required with static addresses; set the default gateway of the node subnet, e.g. \"192.168.1.1\", or set network.dhcp to true")
	case n.Gateway == "":
		p.errorf("network.gateway", "is required with DHCP too: a new node is found by scanning the gateway's subnet (network.prefixLength) for "+
			"the Talos API, because its guest agent does not run before Talos is configured (siderolabs/talos#11651); set the "+
			"default gateway of the node subnet, e.g. \"192.168.1.1\"")
	case n.Gateway != "":
		if _, ok := parseIPv4(n.Gateway); !ok {
			p.errorf("network.gateway", "%q is not an IPv4 address; use e.g. \"192.168.1.1\"", n.Gateway)
		}
	}

	for i, ns := range n.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			p.errorf(fmt.Sprintf("network.nameservers[%d]", i), "%q is not an IP address; Talos needs resolver addresses such as \"1.1.1.1\"", ns)
		}
	}

	for i, s := range n.NTPServers {
		if !isHost(s) {
			p.errorf(fmt.Sprintf("network.ntpServers[%d]", i), "%q is not a host name or IP address; use e.g. \"time.cloudflare.com\"", s)
		}
	}

	if out.DHCP && out.PrefixLength >= 1 && out.PrefixLength < MinScanPrefix {
		p.errorf("network.prefixLength", "%d is too short with DHCP: new nodes are found by scanning the node subnet, at most a /%d "+
			"(4094 addresses); use %d or longer", out.PrefixLength, MinScanPrefix, MinScanPrefix)
	}

	checkCIDRs(p, "network.podSubnets", out.PodSubnets)
	checkCIDRs(p, "network.serviceSubnets", out.ServiceSubnets)
	buildNetwork6(p, n, &out)
	checkOverlaps(p, out)

	if n.VLANID != nil && (*n.VLANID < 1 || *n.VLANID > 4094) {
		p.errorf("network.vlanId", "%d is not a VLAN id; use 1 to 4094, or leave it unset for untagged traffic", *n.VLANID)
	}

	if n.Bridge != "" && !bridgeRe.MatchString(n.Bridge) {
		p.errorf("network.bridge", "%q is not a Proxmox bridge name; use e.g. \"vmbr0\"", n.Bridge)
	}

	c.Network = out
}

// checkOverlaps rejects pod and service networks that overlap the node subnet or each other:
// routing to nodes or services would break.
func checkOverlaps(p *problems, n Network) {
	var nodeNets []netip.Prefix

	if gw, ok := parseIPv4(n.Gateway); ok && n.PrefixLength >= 1 && n.PrefixLength <= 32 {
		nodeNets = append(nodeNets, netip.PrefixFrom(gw, n.PrefixLength).Masked())
	}

	if gw, err := netip.ParseAddr(n.Gateway6); err == nil && gw.Is6() && n.PrefixLength6 >= 1 && n.PrefixLength6 <= 128 {
		nodeNets = append(nodeNets, netip.PrefixFrom(gw, n.PrefixLength6).Masked())
	}

	var pods []netip.Prefix
	for i, s := range n.PodSubnets {
		if c, err := netip.ParsePrefix(s); err == nil {
			pods = append(pods, c.Masked())
			for _, nodes := range nodeNets {
				if c.Overlaps(nodes) {
					p.errorf(fmt.Sprintf("network.podSubnets[%d]", i), "%s overlaps the node subnet %s; pick a range the nodes do not use, e.g. %s", s, nodes, exampleSubnet(c, "10.244.0.0/16", "fd00:10:244::/56"))
				}
			}
		}
	}

	for i, s := range n.ServiceSubnets {
		c, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}

		for _, nodes := range nodeNets {
			if c.Overlaps(nodes) {
				p.errorf(fmt.Sprintf("network.serviceSubnets[%d]", i), "%s overlaps the node subnet %s; pick a range the nodes do not use, e.g. %s", s, nodes, exampleSubnet(c, "10.96.0.0/12", "fd00:10:96::/112"))
			}
		}

		for _, pod := range pods {
			if c.Overlaps(pod) {
				p.errorf(fmt.Sprintf("network.serviceSubnets[%d]", i), "%s overlaps the pod subnet %s; services and pods need separate ranges", s, pod)
			}
		}
	}
}

func checkCIDRs(p *problems, path string, cidrs []string) {
	for i, s := range cidrs {
		if _, err := netip.ParsePrefix(s); err != nil {
			p.errorf(fmt.Sprintf("%s[%d]", path, i), "%q is not a CIDR; use e.g. \"10.244.0.0/16\"", s)
		}
	}
}
