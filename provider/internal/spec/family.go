package spec

import (
	"fmt"
	"net/netip"
)

// maxServiceHostBits is how large a service subnet Kubernetes allows: at most 2^20 addresses
// (kube-apiserver refuses a larger --service-cluster-ip-range), a /12 for IPv4, a /108 for IPv6.
const maxServiceHostBits = 20

// nodeMask6 is the IPv6 pod range each node gets (kube-controller-manager's
// --node-cidr-mask-size-ipv6 default, which Talos keeps); a cluster range is at most 16 bits shorter.
const nodeMask6 = 64

// buildNetwork6 checks the IPv6 side of the network and that the pod and service subnets hold
// one range per family the nodes are addressed in, as Kubernetes dual-stack requires.
func buildNetwork6(p *problems, n NetworkInput, out *Network) {
	if out.PrefixLength6 < 1 || out.PrefixLength6 > 128 {
		p.errorf("network.prefixLength6", "%d is not an IPv6 prefix length; use 1 to 128, usually 64", out.PrefixLength6)
	}

	switch gw, err := netip.ParseAddr(n.Gateway6); {
	case n.Gateway6 == "" && out.IPv6 && !out.IPv4:
		p.errorf("network.gateway6", "is required for an IPv6-only cluster (nodes with ip6 and no ip); set the node subnet's "+
			"IPv6 gateway, e.g. \"fd00:1::1\"")
	case n.Gateway6 == "":
	case err != nil || !gw.Is6() || gw.Is4In6():
		p.errorf("network.gateway6", "%q is not an IPv6 address; use e.g. \"fd00:1::1\"", n.Gateway6)
	case !out.IPv6:
		p.errorf("network.gateway6", "is set but no node has an ip6; give every node an IPv6 address (ip6) or remove it")
	}

	for _, f := range []struct {
		path, v4, v6 string
		cidrs        []string
	}{
		{"network.podSubnets", "10.244.0.0/16", "fd00:10:244::/56", out.PodSubnets},
		{"network.serviceSubnets", "10.96.0.0/12", "fd00:10:96::/112", out.ServiceSubnets},
	} {
		var has4, has6 bool

		for i, s := range f.cidrs {
			c, err := netip.ParsePrefix(s)
			if err != nil {
				continue
			}

			at := fmt.Sprintf("%s[%d]", f.path, i)

			switch {
			case c.Addr().Is4() && has4, c.Addr().Is6() && has6:
				p.errorf(at, "is a second %s range; Kubernetes takes one range per family", family(c.Addr()))
			case c.Addr().Is4() && !out.IPv4:
				p.errorf(at, "is an IPv4 range in an IPv6-only cluster; use an IPv6 one, e.g. %q", f.v6)
			case c.Addr().Is6() && !out.IPv6:
				p.errorf(at, "is an IPv6 range but the nodes have no IPv6 addresses; give every node an ip6 (dual-stack) or remove it")
			case f.path == "network.serviceSubnets" && c.Addr().Is6() && c.Addr().BitLen()-c.Bits() > maxServiceHostBits:
				p.errorf(at, "%s is too large: Kubernetes allows at most 2^%d IPv6 service addresses (a /%d or longer); use e.g. %q",
					s, maxServiceHostBits, c.Addr().BitLen()-maxServiceHostBits, f.v6)
			case f.path == "network.podSubnets" && c.Addr().Is6() && (c.Bits() >= nodeMask6 || c.Bits() < nodeMask6-16):
				p.errorf(at, "%s cannot be split into a /%d per node, as Kubernetes' node IPAM does (the range must be a /%d to "+
					"a /%d); use e.g. %q", s, nodeMask6, nodeMask6-16, nodeMask6-1, f.v6)
			}

			has4, has6 = has4 || c.Addr().Is4(), has6 || c.Addr().Is6()
		}

		switch {
		case out.IPv4 && out.IPv6 && !has6 && len(f.cidrs) > 0:
			p.errorf(f.path, "has no IPv6 range but the cluster is dual-stack (nodes have ip and ip6); add one, e.g. [%q, %q]", f.v4, f.v6)
		case out.IPv4 && out.IPv6 && !has4 && len(f.cidrs) > 0:
			p.errorf(f.path, "has no IPv4 range but the cluster is dual-stack (nodes have ip and ip6); add one, e.g. [%q, %q]", f.v4, f.v6)
		case !out.IPv4 && !has6 && len(f.cidrs) > 0 && !anyIPv4(f.cidrs):
			p.errorf(f.path, "has no IPv6 range for an IPv6-only cluster; use e.g. [%q]", f.v6)
		}
	}
}

// anyIPv4 tells whether a list holds an IPv4 range (reported on its own, by index).
func anyIPv4(cidrs []string) bool {
	for _, s := range cidrs {
		if c, err := netip.ParsePrefix(s); err == nil && c.Addr().Is4() {
			return true
		}
	}

	return false
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}

	return "IPv6"
}

// exampleSubnet is the example of the family of c.
func exampleSubnet(c netip.Prefix, v4, v6 string) string {
	if c.Addr().Is6() {
		return v6
	}

	return v4
}

// checkIP6s checks every node's ip6: IPv6, all in one subnet (gateway6's when set), not the
// gateway's, unique across nodes and families (used). It sets the cluster's Subnet6.
func checkIP6s(p *problems, c *Cluster, used map[netip.Addr]string) {
	n := &c.Network
	if !n.IPv6 || n.PrefixLength6 < 1 || n.PrefixLength6 > 128 {
		return
	}

	// The node subnet is gateway6's, unless that is link-local (a router's fe80:: address, as some
	// hosters give): then the nodes' own addresses name it.
	gw, gwErr := netip.ParseAddr(n.Gateway6)
	if gwErr == nil && gw.Is6() && !gw.IsLinkLocalUnicast() {
		n.Subnet6 = netip.PrefixFrom(gw, n.PrefixLength6).Masked()
	}

	for _, node := range c.Nodes {
		path := "nodes." + node.Name + ".ip6"

		if node.IP6 == "" {
			p.errorf(path, "is missing: other nodes have one, and every node of a dual-stack or IPv6-only cluster needs an "+
				"IPv6 address; set ip6 in the node subnet")
			continue
		}

		a, err := netip.ParseAddr(node.IP6)
		if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" || a.IsLinkLocalUnicast() {
			p.errorf(path, "%q is not a routable IPv6 address; use e.g. \"fd00:1::21\"", node.IP6)
			continue
		}

		// In canonical form: the health gate compares it with the Node's InternalIP.
		setIP6(c, node.Name, a.String())

		if !n.Subnet6.IsValid() {
			n.Subnet6 = netip.PrefixFrom(a, n.PrefixLength6).Masked()
		}

		switch {
		case !n.Subnet6.Contains(a):
			p.errorf(path, "%s is outside the node subnet %s (network.gateway6, network.prefixLength6 %d); use an address in it",
				node.IP6, n.Subnet6, n.PrefixLength6)
		case gwErr == nil && a == gw:
			p.errorf(path, "%s is the IPv6 gateway's address; pick a free address", node.IP6)
		case a == n.Subnet6.Addr():
			p.errorf(path, "%s is the subnet-router anycast address of %s; pick a host address", node.IP6, n.Subnet6)
		}

		if other, dup := used[a]; dup {
			p.errorf(path, "%s is also the address of %s; give every node its own address", node.IP6, other)
		}

		used[a] = path
	}
}

// setIP6 stores a node's IPv6 address in canonical form (its IP too in an IPv6-only cluster).
func setIP6(c *Cluster, name, ip6 string) {
	for i := range c.Nodes {
		if c.Nodes[i].Name == name {
			if c.Nodes[i].IP == c.Nodes[i].IP6 {
				c.Nodes[i].IP = ip6
			}

			c.Nodes[i].IP6 = ip6
		}
	}
}

// checkLinkAddresses reports an address of a node's networks that another node, network or
// family already uses, and a MAC address two NICs share (a derived one included).
func checkLinkAddresses(p *problems, c *Cluster, used map[netip.Addr]string) {
	macs := map[string]string{}

	for _, node := range c.Nodes {
		for _, l := range node.Links {
			for i, s := range l.Addresses {
				a := netip.MustParsePrefix(s).Addr()
				at := fmt.Sprintf("%s.addresses[%d]", l.Path, i)

				if other, dup := used[a]; dup {
					p.errorf(at, "%s is also the address of %s; every address belongs to one NIC of one node", a, other)
				}

				used[a] = at
			}

			for _, i := range l.NICs {
				mac := node.NICs[i].MACAddress
				if mac == "" {
					continue
				}

				if other, dup := macs[mac]; dup {
					p.errorf(l.Path+".macAddress", "%s is also the MAC address of %s; every NIC needs its own", mac, other)
				}

				macs[mac] = l.Path
			}
		}
	}
}
