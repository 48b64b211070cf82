package hostemu

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// What the guest gets of its VM's network: its NICs (netN) and cloud-init's ipconfigN.

// ipConfig is one cloud-init ipconfigN ("ip=127.0.67.11/24,gw=127.0.67.1,ip6=fd1a:b:67::11/64,
// gw6=fd1a:b:67::1"; each part optional, ip=dhcp, ip6=dhcp or auto).
type ipConfig struct {
	ip, gw, ip6, gw6 string
}

func parseIPConfig(v string) ipConfig {
	var c ipConfig

	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")

		switch k {
		case "ip":
			c.ip = val
		case "gw":
			c.gw = val
		case "ip6":
			c.ip6 = val
		case "gw6":
			c.gw6 = val
		}
	}

	return c
}

// network is the node's address and its NICs: ipconfig0 gives the first NIC its addresses (a
// static IPv4 one in 127.0.0.0/8, or a lease from the DHCP pool; a static IPv6 one in
// talosemu.LabIPv6Prefix), and the node is reached at its IPv4 address, or at its IPv6 one
// without. The other NICs get their ipconfigN's static addresses.
func (c *Controller) network(e pvefake.Event) (netip.Prefix, []talosemu.NIC, error) {
	ic := parseIPConfig(e.IPConfig0)

	var v4, v6 netip.Prefix

	switch ic.ip {
	case "":
	case "dhcp":
		lease, err := c.lease(e.VMID)
		if err != nil {
			return netip.Prefix{}, nil, err
		}

		v4 = lease
	default:
		p, err := netip.ParsePrefix(ic.ip)
		if err != nil {
			return netip.Prefix{}, nil, fmt.Errorf("ipconfig0 address %q: %w", ic.ip, err)
		}

		if !p.Addr().Is4() || !p.Addr().IsLoopback() {
			return netip.Prefix{}, nil, fmt.Errorf("ipconfig0 address %s is not on loopback: the lab only runs nodes on 127.0.0.0/8 (and %s)",
				p.Addr(), talosemu.LabIPv6Prefix)
		}

		v4 = p
	}

	switch ic.ip6 {
	case "":
	case "dhcp", "auto":
		if !v4.IsValid() {
			return netip.Prefix{}, nil, fmt.Errorf("ipconfig0 ip6=%s: the lab runs no DHCPv6 server nor router advertisements; "+
				"give an IPv6-only node a static ip6 in %s", ic.ip6, talosemu.LabIPv6Prefix)
		}
	default:
		p, err := netip.ParsePrefix(ic.ip6)
		if err != nil {
			return netip.Prefix{}, nil, fmt.Errorf("ipconfig0 ip6 %q: %w", ic.ip6, err)
		}

		if !p.Addr().Is6() || !talosemu.LabAddress(p.Addr()) {
			return netip.Prefix{}, nil, fmt.Errorf("ipconfig0 ip6 %s is not in the lab's IPv6 prefix %s", p.Addr(), talosemu.LabIPv6Prefix)
		}

		v6 = p
	}

	primary := v4
	if !primary.IsValid() {
		primary = v6
	}

	if !primary.IsValid() {
		return netip.Prefix{}, nil, fmt.Errorf("no ipconfig0 address (%q): the nocloud image would have no network", e.IPConfig0)
	}

	var nics []talosemu.NIC

	for _, n := range e.NICs {
		nic := talosemu.NIC{MAC: n.MAC, MTU: n.MTU, Bridge: n.Bridge, VLAN: n.Tag}

		if n.Index == 0 {
			for _, p := range []netip.Prefix{v4, v6} {
				if p.IsValid() {
					nic.Addresses = append(nic.Addresses, p)
				}
			}
		} else {
			nic.Addresses = staticAddresses(e.Config[fmt.Sprintf("ipconfig%d", n.Index)])
		}

		nics = append(nics, nic)
	}

	return primary, nics, nil
}

// staticAddresses are the static addresses of an ipconfigN (DHCP and SLAAC give the lab nothing).
func staticAddresses(v string) []netip.Prefix {
	var out []netip.Prefix

	ic := parseIPConfig(v)
	for _, s := range []string{ic.ip, ic.ip6} {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}

	return out
}

// hotplug gives a running VM's node its NICs after a configuration update hot-plugged or
// unplugged some, or a reboot: a NIC keeps the cloud-init addresses it booted with, a new one has none
// (cloud-init's drive is written when the VM starts).
func (c *Controller) hotplug(e pvefake.Event) {
	c.mu.Lock()
	n := c.nodes[e.VMID]
	c.mu.Unlock()

	if n == nil {
		return
	}

	booted := map[string][]netip.Prefix{}
	for _, nic := range n.NICs() {
		booted[strings.ToLower(nic.MAC)] = nic.Addresses
	}

	nics := make([]talosemu.NIC, 0, len(e.NICs))
	for _, nic := range e.NICs {
		nics = append(nics, talosemu.NIC{
			MAC: nic.MAC, MTU: nic.MTU, Bridge: nic.Bridge, VLAN: nic.Tag, Addresses: booted[strings.ToLower(nic.MAC)],
		})
	}

	if slices.EqualFunc(n.NICs(), nics, func(a, b talosemu.NIC) bool {
		return a.MAC == b.MAC && a.MTU == b.MTU && a.Bridge == b.Bridge && a.VLAN == b.VLAN && slices.Equal(a.Addresses, b.Addresses)
	}) {
		return
	}

	n.SetNICs(nics)
	c.opts.Logf("lab: VM %d (%s): its NICs changed, now %d", e.VMID, e.Name, len(nics))
}
