package talosconfig

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// bondMIIMon is how often (ms) a bond checks its links' carrier: Talos leaves the kernel's 0,
// which never notices a member going down.
const bondMIIMon = 100

// extraDHCPRouteMetric is the metric of a default route DHCP gives a network other than the
// cluster's: behind the cluster network's (Talos' 1024), which holds the default route.
const extraDHCPRouteMetric = 2048

// route is one static route: an empty destination is the default route of the gateway's family.
type route struct{ destination, gateway string }

// linkAddresses are a link's static addresses: for the cluster network the node's ip (unless
// DHCP) and ip6 with the cluster's prefix lengths, else the network's own.
func linkAddresses(c *spec.Cluster, n spec.Node, l spec.Link, a Addresses) []string {
	if !l.Cluster {
		return l.Addresses
	}

	var out []string

	if c.Network.IPv4 && !c.Network.DHCP {
		out = append(out, fmt.Sprintf("%s/%d", a.NodeIP, c.Network.PrefixLength))
	}

	if c.Network.IPv6 && n.IP6 != "" {
		out = append(out, fmt.Sprintf("%s/%d", n.IP6, c.Network.PrefixLength6))
	}

	return out
}

// linkRoutes are a link's routes: the default routes of the cluster network (IPv4 unless
// DHCP, IPv6 with gateway6), or a network's routes through its gateway.
func linkRoutes(c *spec.Cluster, l spec.Link) []route {
	var out []route

	if l.Cluster {
		if c.Network.IPv4 && !c.Network.DHCP && c.Network.Gateway != "" {
			out = append(out, route{gateway: c.Network.Gateway})
		}

		if c.Network.IPv6 && c.Network.Gateway6 != "" {
			out = append(out, route{gateway: c.Network.Gateway6})
		}

		return out
	}

	for _, r := range l.Routes {
		out = append(out, route{destination: r, gateway: l.Gateway})
	}

	return out
}

// defaultRoute is the v1alpha1 network of a default route through gw.
func defaultRoute(gw string) string {
	if a, err := netip.ParseAddr(gw); err == nil && a.Is6() {
		return "::/0"
	}

	return "0.0.0.0/0"
}

// hardwareAddr is how Talos writes a MAC address.
func hardwareAddr(mac string) string { return strings.ToLower(mac) }

// v1alpha1Interfaces are `.machine.network.interfaces` (up to contract v1.11): one per link,
// a NIC selected by its MAC (a node's one NIC without a fixed MAC: the physical one), a bond by
// its NICs' MACs.
func v1alpha1Interfaces(c *spec.Cluster, n spec.Node, a Addresses) []any {
	var out []any

	for _, l := range n.Links {
		iface := map[string]any{}

		if l.BondMode != "" {
			// By permanent address: the bond gives its members one MAC, the first's.
			var selectors []any
			for _, i := range l.NICs {
				selectors = append(selectors, map[string]any{"permanentAddr": hardwareAddr(n.NICs[i].MACAddress)})
			}

			iface["interface"] = l.Name
			iface["bond"] = map[string]any{"mode": l.BondMode, "deviceSelectors": selectors, "miimon": bondMIIMon}
		} else if mac := n.NICs[l.NICs[0]].MACAddress; mac != "" {
			iface["deviceSelector"] = map[string]any{"hardwareAddr": hardwareAddr(mac)}
		} else {
			iface["deviceSelector"] = map[string]any{"physical": true}
		}

		if l.MTU > 0 {
			iface["mtu"] = l.MTU
		}

		iface["dhcp"] = l.DHCP || (l.Cluster && c.Network.DHCP)
		if l.DHCP && !l.Cluster {
			iface["dhcpOptions"] = map[string]any{"routeMetric": extraDHCPRouteMetric}
		}

		if addrs := linkAddresses(c, n, l, a); len(addrs) > 0 {
			iface["addresses"] = addrs
		}

		var routes []any
		for _, r := range linkRoutes(c, l) {
			network := r.destination
			if network == "" {
				network = defaultRoute(r.gateway)
			}

			routes = append(routes, map[string]any{"network": network, "gateway": r.gateway})
		}

		if len(routes) > 0 {
			iface["routes"] = routes
		}

		if l.Cluster && n.Role == spec.RoleControlPlane && c.VIP != "" {
			iface["vip"] = map[string]any{"ip": c.VIP}
		}

		out = append(out, iface)
	}

	return out
}

// linkDocuments are the network documents of contract v1.12 and later: a LinkAliasConfig per
// NIC (net<i>, selected by MAC, or a node's one NIC without a fixed MAC by its virtio driver),
// then per link its LinkConfig or BondConfig, its DHCPv4Config, and the VIP on the cluster link.
func linkDocuments(c *spec.Cluster, n spec.Node, a Addresses, doc func(string, map[string]any) map[string]any) []map[string]any {
	var docs []map[string]any

	for i, nic := range n.NICs {
		match := `link.driver == "virtio_net"`
		if nic.MACAddress != "" {
			match = fmt.Sprintf("mac(link.permanent_addr) == %q", hardwareAddr(nic.MACAddress))
		}

		docs = append(docs, doc("LinkAliasConfig", map[string]any{"name": fmt.Sprintf("net%d", i), "selector": map[string]any{"match": match}}))
	}

	for _, l := range n.Links {
		fields := map[string]any{"name": l.Name, "up": true}

		if l.MTU > 0 {
			fields["mtu"] = l.MTU
		}

		var addrs []any
		for _, s := range linkAddresses(c, n, l, a) {
			addrs = append(addrs, map[string]any{"address": s})
		}

		if len(addrs) > 0 {
			fields["addresses"] = addrs
		}

		var routes []any
		for _, r := range linkRoutes(c, l) {
			rt := map[string]any{"gateway": r.gateway}
			if r.destination != "" {
				rt["destination"] = r.destination
			}

			routes = append(routes, rt)
		}

		if len(routes) > 0 {
			fields["routes"] = routes
		}

		dhcp := l.DHCP || (l.Cluster && c.Network.DHCP)

		switch {
		case l.BondMode != "":
			var links []string
			for _, i := range l.NICs {
				links = append(links, fmt.Sprintf("net%d", i))
			}

			fields["links"], fields["bondMode"], fields["miimon"] = links, l.BondMode, bondMIIMon
			docs = append(docs, doc("BondConfig", fields))
		case len(fields) > 2 || !dhcp:
			docs = append(docs, doc("LinkConfig", fields))
		}

		switch {
		case l.Cluster && dhcp:
			docs = append(docs, doc("DHCPv4Config", map[string]any{"name": l.Name}))
		case dhcp:
			docs = append(docs, doc("DHCPv4Config", map[string]any{"name": l.Name, "routeMetric": extraDHCPRouteMetric}))
		}

		if l.Cluster && n.Role == spec.RoleControlPlane && c.VIP != "" {
			docs = append(docs, doc("Layer2VIPConfig", map[string]any{"name": c.VIP, "link": l.Name}))
		}
	}

	return docs
}

// nodeSubnets are the node subnets, one per family (IPv4 first; IPv6 the node's own address),
// which keep the kubelet and etcd
// off the VIP and off the node's other networks. With DHCP they are left to Talos on a node with
// one network (the subnet is the DHCP server's choice; gateway and prefixLength only bound the
// scan for new nodes), but a node with several networks needs them: Talos would otherwise pick
// its lowest IPv4 address, perhaps a storage network's.
func nodeSubnets(c *spec.Cluster, n spec.Node) []string {
	if c.Network.DHCP && len(n.Links) < 2 {
		return nil
	}

	var out []string

	if gw, err := netip.ParseAddr(c.Network.Gateway); c.Network.IPv4 && err == nil {
		out = append(out, netip.PrefixFrom(gw, c.Network.PrefixLength).Masked().String())
	}

	// The node's own IPv6 address, not its /64: Talos accepts router advertisements, and a SLAAC
	// address of the same /64 could become the Node's IPv6 InternalIP or etcd's address.
	if a, err := netip.ParseAddr(n.IP6); c.Network.IPv6 && err == nil {
		out = append(out, netip.PrefixFrom(a, a.BitLen()).String())
	}

	return out
}
