package talosemu

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// LabIPv6Prefix is the lab's IPv6 prefix, what 127.0.0.0/8 is to its IPv4 nodes: a ULA prefix
// (RFC 4193) whose addresses are local to the host. Unlike 127/8, Linux does not route it to the
// loopback interface by itself: only inside the lab's network namespace (lab/netns), where `local
// fd1a:b::/48 dev lo` is added, can nodes bind addresses in it; elsewhere listening fails with
// EADDRNOTAVAIL (see ErrNoIPv6Namespace).
const LabIPv6Prefix = "fd1a:b::/48"

var (
	labIPv6Prefix = netip.MustParsePrefix(LabIPv6Prefix)
	loopbackV4    = netip.MustParsePrefix("127.0.0.0/8")
)

// ErrNoIPv6Namespace is the error of a node that cannot listen on its address in LabIPv6Prefix:
// the process does not run inside the lab's network namespace.
var ErrNoIPv6Namespace = errors.New("the lab's IPv6 prefix " + LabIPv6Prefix + " is not bound here: " +
	"run the lab inside its network namespace (lab/netns adds `local " + LabIPv6Prefix + " dev lo`)")

// LabAddress reports whether a can be a lab node's address: in 127.0.0.0/8, or in LabIPv6Prefix.
func LabAddress(a netip.Addr) bool {
	a = a.Unmap()

	return (a.Is4() && loopbackV4.Contains(a)) || (a.Is6() && labIPv6Prefix.Contains(a))
}

// NIC is one of the VM's network devices as the guest sees it: link eth0 is the first, eth1 the
// second, …
type NIC struct {
	// MAC is its hardware address ("bc:24:11:aa:bb:01", any case).
	MAC string
	// MTU is the most the device carries: the VM NIC's host MTU (0: 1500). The link comes up
	// with it, and a configuration asking for more leaves the link at it, as the virtio driver
	// refuses a larger one.
	MTU int
	// Bridge and VLAN say where the NIC plugs in on the host (reported nowhere; for logs).
	Bridge string
	VLAN   int
	// Addresses are what cloud-init (the nocloud platform configuration, Proxmox' ipconfigN)
	// gives the NIC: Talos keeps them on the link whatever the machine configuration says, as
	// its platform network configuration layer.
	Addresses []netip.Prefix
}

func (c NIC) maxMTU() int {
	if c.MTU <= 0 {
		return 1500
	}

	return c.MTU
}

// listen opens the API listener on ip: an address in LabIPv6Prefix outside the lab's network
// namespace says so.
func listen(ip netip.Addr, port int) (net.Listener, error) {
	addr := net.JoinHostPort(ip.String(), fmt.Sprint(port))

	lis, err := net.Listen("tcp", addr)
	if err != nil && ip.Is6() && labIPv6Prefix.Contains(ip) && errors.Is(err, syscall.EADDRNOTAVAIL) {
		return nil, fmt.Errorf("listening on %s: %w (%w)", addr, ErrNoIPv6Namespace, err)
	}

	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}

	return lis, nil
}

// defaultNICs are the NICs of a node started without Options.NICs: one, eth0, with
// Options.MACAddress (or a MAC in Proxmox' OUI made from the address) and the node's address.
func defaultNICs(o Options, ip netip.Addr) []NIC {
	mac := o.MACAddress
	if _, err := net.ParseMAC(mac); err != nil {
		b := ip.As16()
		mac = fmt.Sprintf("bc:24:11:%02x:%02x:%02x", b[13], b[14], b[15])
	}

	return []NIC{{MAC: mac, Addresses: []netip.Prefix{netip.PrefixFrom(ip, ip.BitLen())}}}
}
