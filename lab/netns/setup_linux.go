//go:build linux

package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// nonlocalBind is the namespace's own sysctl (files under /proc/sys/net are those of the reading
// process's network namespace) that lets IPv6 sockets bind addresses no interface holds: Linux
// checks an IPv6 bind against the interfaces' addresses, not against local routes as IPv4 does.
const nonlocalBind = "/proc/sys/net/ipv6/ip_nonlocal_bind"

var setup struct {
	once sync.Once
	err  error
}

// setupOnce sets up this process's namespace the first time it is called and returns the
// outcome of that every time.
func setupOnce() error {
	setup.once.Do(func() { setup.err = setupNamespace() })
	return setup.err
}

// setupNamespace brings lo up, makes Prefix a local route on it and lets IPv6 sockets bind its
// addresses, after making sure that this network namespace is one that Run created: a private
// one with lo alone, not the one of the process that started this one. It is idempotent: a
// process started inside the namespace may call Run again.
func setupNamespace() error {
	here, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return fmt.Errorf("reading this process's network namespace: %w", err)
	}
	if here == os.Getenv(envMarker) {
		return fmt.Errorf("%s is set, but this process is in the network namespace it names (%s), not in a "+
			"private one: refusing to change it (was %s inherited from elsewhere?)", envMarker, here, envMarker)
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("listing the namespace's interfaces: %w", err)
	}
	var lo *net.Interface
	for i := range ifaces {
		if ifaces[i].Name != "lo" {
			return fmt.Errorf("this network namespace has interface %s besides lo: it is not one that netns.Run "+
				"created, refusing to change it", ifaces[i].Name)
		}
		lo = &ifaces[i]
	}
	if lo == nil {
		return errors.New("this network namespace has no lo")
	}

	nl, err := dialNetlink()
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Close(nl) }()
	if lo.Flags&net.FlagUp == 0 {
		if err := setLinkUp(nl, lo.Index); err != nil {
			return fmt.Errorf("bringing lo up: %w", err)
		}
	}
	if err := os.WriteFile(nonlocalBind, []byte("1\n"), 0); err != nil {
		return fmt.Errorf("letting IPv6 sockets bind the prefix's addresses (is IPv6 disabled?): %w", err)
	}
	if err := addLocalRoute(nl, lo.Index, Prefix); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("adding the local route %s dev lo: %w", Prefix, err)
	}
	return selfCheck()
}

// selfCheck listens on an address of Prefix and 127.0.0.1 and connects to both, so that a
// namespace that does not work fails here, with what failed, rather than in the test.
func selfCheck() error {
	for _, a := range []netip.Addr{Addr(0, 1), netip.AddrFrom4([4]byte{127, 0, 0, 1})} {
		l, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
		if err != nil {
			return fmt.Errorf("the namespace does not work: %w", err)
		}
		c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
		_ = l.Close()
		if err != nil {
			return fmt.Errorf("the namespace does not work: %w", err)
		}
		_ = c.Close()
	}
	return nil
}

// dialNetlink opens a rtnetlink socket whose reads time out.
func dialNetlink() (int, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return -1, fmt.Errorf("opening a netlink socket: %w", err)
	}
	tv := syscall.Timeval{Sec: 5}
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		_ = syscall.Close(fd)
		return -1, fmt.Errorf("netlink socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		_ = syscall.Close(fd)
		return -1, fmt.Errorf("netlink socket: %w", err)
	}
	return fd, nil
}

// setLinkUp sends RTM_NEWLINK setting IFF_UP on the interface (`ip link set lo up`).
func setLinkUp(fd, index int) error {
	msg := make([]byte, syscall.SizeofIfInfomsg)
	msg[0] = syscall.AF_UNSPEC                              // ifi_family
	binary.NativeEndian.PutUint32(msg[4:], uint32(index))   // ifi_index
	binary.NativeEndian.PutUint32(msg[8:], syscall.IFF_UP)  // ifi_flags
	binary.NativeEndian.PutUint32(msg[12:], syscall.IFF_UP) // ifi_change
	return netlinkDo(fd, syscall.RTM_NEWLINK, 0, msg)
}

// addLocalRoute sends RTM_NEWROUTE for a route of type local in the local table, of host scope,
// through the interface (`ip -6 route add local <prefix> dev lo`): every address of the prefix
// is then this host's.
func addLocalRoute(fd, index int, prefix netip.Prefix) error {
	dst := prefix.Masked().Addr().As16()
	msg := make([]byte, syscall.SizeofRtMsg, syscall.SizeofRtMsg+2*syscall.SizeofRtAttr+len(dst)+4)
	msg[0] = syscall.AF_INET6       // rtm_family
	msg[1] = byte(prefix.Bits())    // rtm_dst_len
	msg[4] = syscall.RT_TABLE_LOCAL // rtm_table
	msg[5] = syscall.RTPROT_BOOT    // rtm_protocol, as ip's default
	msg[6] = syscall.RT_SCOPE_HOST  // rtm_scope
	msg[7] = syscall.RTN_LOCAL      // rtm_type
	msg = appendAttr(msg, syscall.RTA_DST, dst[:])
	msg = appendAttr(msg, syscall.RTA_OIF, binary.NativeEndian.AppendUint32(nil, uint32(index)))
	return netlinkDo(fd, syscall.RTM_NEWROUTE, syscall.NLM_F_CREATE|syscall.NLM_F_EXCL, msg)
}

// appendAttr appends a route attribute, padded to 4 bytes.
func appendAttr(msg []byte, typ uint16, data []byte) []byte {
	msg = binary.NativeEndian.AppendUint16(msg, uint16(syscall.SizeofRtAttr+len(data)))
	msg = binary.NativeEndian.AppendUint16(msg, typ)
	msg = append(msg, data...)
	for len(msg)%syscall.NLMSG_ALIGNTO != 0 {
		msg = append(msg, 0)
	}
	return msg
}

// netlinkDo sends one request with an acknowledgement asked for and returns the kernel's answer:
// nil or the errno it refused the request with.
func netlinkDo(fd int, typ, flags uint16, body []byte) error {
	const seq = 1
	msg := make([]byte, syscall.NLMSG_HDRLEN, syscall.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(syscall.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|syscall.NLM_F_REQUEST|syscall.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	msg = append(msg, body...)
	if err := syscall.Sendto(fd, msg, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("netlink: waiting for the kernel's answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq || m.Header.Type != syscall.NLMSG_ERROR {
				continue
			}
			if len(m.Data) < 4 {
				return errors.New("netlink: short answer")
			}
			if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
				return syscall.Errno(-code)
			}
			return nil
		}
	}
}
