package talosemu

import (
	"cmp"
	"context"
	"net/netip"
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
)

// The node's network at run time: the COSI resources it publishes (LinkStatus, AddressStatus,
// NodeAddress), the addresses its API answers at, and the VIPs it holds.

// networkFor is the node's network with its current NICs running cfg (nil: maintenance mode),
// cached per configuration and NIC change. Callers hold n.mu.
func (n *Node) networkFor(cfg *appliedConfig) *netModel {
	if n.net != nil && n.netCfg == cfg && n.netGen == n.nicsGen {
		return n.net
	}

	if cfg == nil {
		n.net = buildNetwork(n.nics, nil)
	} else {
		n.net = buildNetwork(n.nics, cfg.cfg)
	}

	n.netCfg, n.netGen = cfg, n.nicsGen

	return n.net
}

// nodeAddresses are the addresses the node holds (not its VIPs), in the order of Talos' routed
// NodeAddress: by address (IPv4 before IPv6, then numerically, as its default sort algorithm
// does), whatever the link. What its kubelet and etcd choose from: without validSubnets or
// advertisedSubnets a multi-homed node takes its lowest address, as on Talos. Callers hold n.mu.
func (n *Node) nodeAddresses(m *netModel) []netip.Addr {
	var out []netip.Addr

	for _, a := range m.addrs {
		if !slices.Contains(out, a.prefix.Addr()) {
			out = append(out, a.prefix.Addr())
		}
	}

	slices.SortFunc(out, netip.Addr.Compare)

	return out
}

// listenAddrs are the addresses the API answers at: the lab addresses the node holds (a VIP is
// not one: the lab's API server answers there).
func (n *Node) listenAddrs(m *netModel) []netip.Addr {
	return slices.DeleteFunc(n.nodeAddresses(m), func(a netip.Addr) bool { return !LabAddress(a) })
}

// NICs are the VM's NICs as the node has them now.
func (n *Node) NICs() []NIC {
	n.mu.Lock()
	defer n.mu.Unlock()

	return slices.Clone(n.nics)
}

// SetNICs replaces the VM's NICs while the node runs (a hot-plug): links come and go, the
// configuration applies to the new ones.
func (n *Node) SetNICs(nics []NIC) {
	n.mu.Lock()
	defer n.mu.Unlock()

	if n.closing {
		return
	}

	n.nics = slices.Clone(nics)
	n.nicsGen++
	n.publishLocked()
	n.Cluster().update(n, n.recordLocked())
}

// publishNetworkLocked publishes the links and addresses of the running network and makes the
// API answer at the addresses the node holds.
func (n *Node) publishNetworkLocked() {
	m := n.networkFor(n.active)
	st, ctx := n.resources, context.Background()

	links, addrs := map[string]bool{}, map[string]bool{}

	for _, l := range m.links {
		put(st, linkStatus(l))
		links[l.name] = true
	}

	addr := func(l *netLink, p netip.Prefix, scope nethelpers.Scope) {
		r := network.NewAddressStatus(network.NamespaceName, network.AddressID(l.name, p))
		s := r.TypedSpec()
		s.Address, s.LinkIndex, s.LinkName, s.Scope = p, l.index, l.name, scope
		s.Flags = nethelpers.AddressFlags(nethelpers.AddressPermanent)
		s.Family = nethelpers.FamilyInet4

		if p.Addr().Is4() {
			s.Local = p.Addr()
		} else {
			s.Family = nethelpers.FamilyInet6
		}

		put(st, r)
		addrs[r.Metadata().ID()] = true
	}

	lo := m.link("lo")
	addr(lo, netip.MustParsePrefix("127.0.0.1/8"), nethelpers.ScopeHost)
	addr(lo, netip.MustParsePrefix("::1/128"), nethelpers.ScopeHost)

	current := []netip.Prefix{}

	for _, a := range m.addrs {
		addr(m.link(a.link), a.prefix, nethelpers.ScopeGlobal)
		current = append(current, a.prefix)
	}

	for _, v := range n.heldVIPs {
		for _, d := range m.vips {
			if d.ip == v && d.link != "" {
				addr(m.link(d.link), netip.PrefixFrom(v, v.BitLen()), nethelpers.ScopeGlobal)
				current = append(current, netip.PrefixFrom(v, v.BitLen()))

				break
			}
		}
	}

	// Sorted as Talos' default (legacy) algorithm sorts them: the first is the "default" one.
	slices.SortFunc(current, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}

		return cmp.Compare(a.Bits(), b.Bits())
	})

	for _, id := range []string{network.NodeAddressCurrentID, network.NodeAddressRoutedID, network.NodeAddressAccumulativeID, network.NodeAddressDefaultID} {
		r := network.NewNodeAddress(network.NamespaceName, id)
		r.TypedSpec().SortAlgorithm = nethelpers.AddressSortAlgorithmV1
		r.TypedSpec().Addresses = slices.Clone(current)

		if id == network.NodeAddressDefaultID && len(current) > 1 {
			r.TypedSpec().Addresses = current[:1]
		}

		put(st, r)
	}

	for _, kind := range []struct {
		typ  resource.Type
		keep map[string]bool
	}{{network.LinkStatusType, links}, {network.AddressStatusType, addrs}} {
		list, err := st.List(ctx, resource.NewMetadata(network.NamespaceName, kind.typ, "", resource.VersionUndefined))
		if err != nil {
			continue
		}

		for _, r := range list.Items {
			if !kind.keep[r.Metadata().ID()] {
				remove(st, r.Metadata())
			}
		}
	}

	n.listenLocked(m)
}

// listenLocked makes the current boot answer at the addresses the node holds, and no others:
// the API stops answering at an address the node lost. Listening at another address than the
// node's own is tried: one another process holds, or an IPv6 one outside the lab's network
// namespace, is left out (and said once).
func (n *Node) listenLocked(m *netModel) {
	b := n.boot
	if b == nil {
		return
	}

	want := n.listenAddrs(m)

	for ip := range b.lis {
		if !slices.Contains(want, ip) {
			b.drop(ip)
			n.opts.Logf("talosemu %s: no longer holds %s; its API stops answering there", n.addr, ip)
		}
	}

	for _, ip := range want {
		if b.lis[ip] != nil {
			continue
		}

		lis, err := listen(ip, b.port)
		if err != nil {
			if !n.listenFailed[ip] {
				n.opts.Logf("talosemu %s: not answering at %s: %v", n.addr, ip, err)
				n.listenFailed[ip] = true
			}

			continue
		}

		b.serve(ip, lis)
	}
}

// refreshVIPsLocked asks the cluster which of the VIPs the node's configuration declares it
// holds now, and republishes its addresses when that changed.
func (n *Node) refreshVIPsLocked() {
	var held []netip.Addr

	if n.active != nil {
		for _, d := range n.networkFor(n.active).vips {
			if d.link != "" && n.Cluster().vipHolder(d.ip) == n {
				held = append(held, d.ip)
			}
		}
	}

	if !slices.Equal(held, n.heldVIPs) {
		n.heldVIPs = held
		n.publishNetworkLocked()
	}
}

// watchVIPs keeps the node's VIPs in line with the cluster's election until the node stops.
func (n *Node) watchVIPs() {
	for {
		ch := n.Cluster().changedCh()

		n.mu.Lock()
		if !n.closing {
			n.refreshVIPsLocked()
		}
		n.mu.Unlock()

		select {
		case <-ch:
		case <-n.ctx.Done():
			return
		}
	}
}

// vipHolder is the node holding vip: the control plane that holds it already while it can, else
// the first up control plane whose etcd member runs and whose configuration puts vip on a link it
// has (Talos elects the VIP's holder through etcd).
func (c *Cluster) vipHolder(vip netip.Addr) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()

	eligible := func(n *Node) bool {
		rec, e := c.records[n], c.etcd[n]

		return rec.up && rec.controlPlane && e != nil && e.member != nil && slices.Contains(rec.vips, vip)
	}

	if h := c.vipOwners[vip]; h != nil && slices.Contains(c.nodes, h) && eligible(h) {
		return h
	}

	delete(c.vipOwners, vip)

	for _, n := range c.nodes {
		if eligible(n) {
			c.vipOwners[vip] = n

			return n
		}
	}

	return nil
}
