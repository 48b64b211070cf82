package spec

import (
	"net/netip"
)

func buildAddresses(p *problems, in Input, c *Cluster) {
	dhcp := c.Network.DHCP
	gw, gwOK := parseIPv4(c.Network.Gateway)

	var subnet netip.Prefix
	if gwOK && c.Network.PrefixLength >= 1 && c.Network.PrefixLength <= 32 {
		subnet = netip.PrefixFrom(gw, c.Network.PrefixLength).Masked()
	}

	if !dhcp && c.Image.Platform == "metal" {
		p.errorf("image.platform", "\"metal\" images ignore Proxmox cloud-init, so static addresses cannot be set; use \"nocloud\" or set network.dhcp to true")
	}

	// checkIP reports what is wrong with an address; it returns the address whenever it
	// parses, so clashes with other addresses are found even when the address is also wrong
	// in another way.
	used := map[netip.Addr]string{}
	checkIP := func(path, s string) (netip.Addr, bool) {
		a, ok := parseIPv4(s)
		switch {
		case !ok:
			p.errorf(path, "%q is not an IPv4 address; use e.g. \"192.168.1.21\"", s)
		case subnet.IsValid() && !subnet.Contains(a):
			p.errorf(path, "%s is outside the gateway's subnet %s (network.gateway %s, network.prefixLength %d); use an address in that subnet or fix the prefix length", s, subnet, gw, c.Network.PrefixLength)
		case gwOK && a == gw:
			p.errorf(path, "%s is the gateway's address; pick a free address", s)
		case subnet.IsValid() && subnet.Bits() <= 30 && (a == subnet.Addr() || a == lastAddr(subnet)):
			p.errorf(path, "%s is the network or broadcast address of %s; pick a host address", s, subnet)
		}
		return a, ok
	}

	seenVMID := map[int]string{}

	for _, n := range c.Nodes {
		path := "nodes." + n.Name
		switch {
		case !c.Network.IPv4:
			// IPv6-only: the node is reached at its ip6 (checkIP6s).
		case dhcp && n.IP != "":
			p.errorf(path+".ip", "is set but network.dhcp is true; remove the address or turn DHCP off")
		case !dhcp && n.IP == "":
			p.errorf(path+".ip", "is required with static addressing; give the node an address in the gateway's subnet, or set network.dhcp to true")
		case !dhcp:
			if a, ok := checkIP(path+".ip", n.IP); ok {
				if other, dup := used[a]; dup {
					p.errorf(path+".ip", "%s is also the address of %s; give every node its own address", n.IP, other)
				}
				used[a] = path
			}
		}

		if n.VMID != 0 {
			if other, dup := seenVMID[n.VMID]; dup {
				p.errorf(path+".vmId", "%d is also the VM id of %s; VM ids are unique across a Proxmox cluster", n.VMID, other)
			}
			seenVMID[n.VMID] = path
		}

	}

	checkIP6s(p, c, used)
	checkLinkAddresses(p, c, used)
	checkVIP(p, in.VIP, c, used, checkIP)

	c.VIP = in.VIP
	c.Endpoint = in.Endpoint

	if c.Endpoint == "" {
		c.Endpoint = c.VIP
	}

	cps := c.ControlPlanes()
	if c.Endpoint == "" && !dhcp && len(cps) > 0 {
		c.Endpoint = cps[0].IP
	}

	if in.VIP == "" && in.Endpoint == "" && (len(cps) > 1 || dhcp) {
		p.warnf("endpoint", "is not set and there is no vip, so the Kubernetes API endpoint is the first control plane's address%s; "+
			"adding or removing control planes would move it and rewrite every node's configuration: set vip (or endpoint to a load balancer)",
			map[bool]string{true: ", which DHCP may change", false: ""}[dhcp])
	}
}

// checkVIP checks the VIP: a free unicast address in the node subnet of its family (IPv6 too,
// which Talos' Layer 2 VIP announces by NDP).
func checkVIP(p *problems, vip string, c *Cluster, used map[netip.Addr]string, checkIP func(path, s string) (netip.Addr, bool)) {
	if vip == "" {
		return
	}

	a, err := netip.ParseAddr(vip)

	switch {
	case err == nil && a.Is6() && !c.Network.IPv6:
		p.errorf("vip", "%s is an IPv6 address but the nodes have no ip6; use an IPv4 address in the node subnet", vip)
		return
	case err == nil && a.Is6() && (a.Is4In6() || a.Zone() != "" || !a.IsGlobalUnicast() && !a.IsPrivate()):
		p.errorf("vip", "%s is not a unicast host address; use a free address in the node subnet", vip)
		return
	case err == nil && a.Is6():
		s := c.Network.Subnet6

		switch gw, gwErr := netip.ParseAddr(c.Network.Gateway6); {
		case s.IsValid() && !s.Contains(a):
			p.errorf("vip", "%s is outside the IPv6 node subnet %s; use a free address in it", vip, s)
		case gwErr == nil && gw == a:
			p.errorf("vip", "%s is the IPv6 gateway's address; the VIP must be a free address shared by the control planes", vip)
		case s.IsValid() && a == s.Addr():
			p.errorf("vip", "%s is the subnet-router anycast address of %s; pick a host address", vip, s)
		}
	case err == nil && a.Is4() && !c.Network.IPv4:
		p.errorf("vip", "%s is an IPv4 address in an IPv6-only cluster; use a free IPv6 address in the node subnet", vip)
		return
	case err == nil && a.Is4() && !a.IsGlobalUnicast() && !a.IsLoopback() && !a.IsPrivate():
		p.errorf("vip", "%s is not a unicast host address; use a free address in the node subnet", vip)
		return
	default:
		v4, ok := checkIP("vip", vip)
		if !ok {
			return
		}

		a = v4
	}

	if other, dup := used[a]; dup {
		p.errorf("vip", "%s is also the address of %s; the VIP must be a free address shared by the control planes", vip, other)
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	hostBits := 32 - p.Bits()
	for i := 3; i >= 0 && hostBits > 0; i-- {
		take := min(hostBits, 8)
		a[i] |= byte(1<<take - 1)
		hostBits -= take
	}

	return netip.AddrFrom4(a)
}
