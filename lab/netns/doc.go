// Package netns runs a Go test inside a private user and network namespace of its own, where the
// lab's IPv6 prefix fd1a:b::/48 ([Prefix]) is local: any address in it can be listened on and
// connected to, as 127.0.0.0/8 can on loopback. End-to-end tests of IPv6-only clusters use it to
// give emulated nodes as many IPv6 addresses as they need without changing the machine's network:
// the namespace is the test's alone and dies with it.
//
// A test opts in with its first statement:
//
//	func TestIPv6Cluster(t *testing.T) {
//		if netns.Run(t) {
//			return // the test ran in its namespace, and passed there
//		}
//		// From here on the test runs inside the namespace.
//		l, err := net.Listen("tcp", netip.AddrPortFrom(netns.Addr(1, 0x10), 50000).String())
//		...
//	}
//
// In the test's own process, [Run] re-executes the test binary with -test.run matching exactly
// this test (its full name, subtests included) in a new user and network namespace, streams its
// output into the test's and fails the test if it failed there; it returns true and the caller
// returns. In the re-executed process ([Inside] reports true) [Run] brings lo up, makes
// [Prefix] a local route on it (`ip -6 route add local fd1a:b::/48 dev lo`) and lets IPv6
// sockets bind addresses that no interface holds (net.ipv6.ip_nonlocal_bind=1, the namespace's
// own sysctl: Linux binds an AnyIP route's IPv6 addresses only then), once per process, and
// returns false: the test body runs there. Every process the test starts (the Pulumi CLI, its
// plugins, kube-apiserver) inherits the namespace.
//
// Things to know:
//   - The re-executed test binary runs TestMain and, for a subtest, its parents' bodies up to the
//     subtest again, inside the namespace; code after a t.Run of a subtest that calls Run runs in
//     both processes unless guarded with [Inside].
//   - The namespace has lo and nothing else: no route leaves the machine, outside addresses are
//     unreachable. A connection to an address of [Prefix] comes from ::1 unless the client binds
//     another. IPv6 sockets may bind any address, but only those of [Prefix] are reachable.
//   - The namespace dies with the test: the re-executed binary gets SIGKILL when the test's process
//     dies (Pdeathsig), and once it exited every process still in its network namespace is
//     killed. If the test's process is killed outright, processes the test started that do not
//     set Pdeathsig themselves (as lab/kubecp does) outlive it until they exit.
//   - The user namespace maps the caller's uid and gid to themselves and gives the test
//     CAP_NET_ADMIN in it (ambient, so its children have it too); as root that is root. The kernel
//     must allow user namespaces: if it refuses, the test fails and says which setting to check.
//   - Linux only: elsewhere Run fails the test.
package netns

import (
	"fmt"
	"net/netip"
)

// Prefix is the lab's IPv6 prefix: local on lo inside a namespace of [Run], absent outside it.
var Prefix = netip.MustParsePrefix("fd1a:b::/48")

// Addr returns host number host of subnet number subnet of [Prefix]: fd1a:b:0:<subnet>::<host>,
// both numbers written in hexadecimal, so Addr(1, 0x10) is fd1a:b:0:1::10 in the /64
// fd1a:b:0:1::/64. Both range over 0..0xffff; Addr panics on others.
func Addr(subnet, host int) netip.Addr {
	if subnet < 0 || subnet > 0xffff || host < 0 || host > 0xffff {
		panic(fmt.Sprintf("netns.Addr(%d, %d): subnet and host range over 0..0xffff", subnet, host))
	}
	a := Prefix.Addr().As16()
	a[6], a[7] = byte(subnet>>8), byte(subnet)
	a[14], a[15] = byte(host>>8), byte(host)
	return netip.AddrFrom16(a)
}
