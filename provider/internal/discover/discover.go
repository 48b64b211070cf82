// Package discover finds a DHCP node on its first boot, before anything else knows its address:
// it scans the node's subnet for the Talos API and reads each answering node's links through the
// insecure maintenance API until one has the VM's MAC address. It is first-boot discovery, not
// the operation of a running cluster, so it lives apart from day2.
package discover

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
)

// MaxScanHosts bounds the subnet FindByMAC scans (a /20).
const MaxScanHosts = 4094

// Scan settings: how long a TCP connect to the Talos API port may take, how many run at once,
// and how long reading a node's links may take.
var (
	scanDialTimeout = 400 * time.Millisecond
	scanParallel    = 64
	scanReadTimeout = 5 * time.Second
)

// FindByMAC finds the address of the Talos node whose NIC has mac, in maintenance mode (or
// configured with the same machine), by scanning subnet for the Talos API (port 50000) and reading
// each answering node's links through the insecure maintenance API, as `talosctl get links
// --insecure` does. It is how a DHCP node is found before its QEMU guest agent runs: Talos starts
// extensions only once it has a configuration (siderolabs/talos#11651). It returns an error only
// when the subnet cannot be scanned; no match is a zero address.
func FindByMAC(ctx context.Context, subnet netip.Prefix, mac string) (netip.Addr, error) {
	want, err := net.ParseMAC(mac)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not a MAC address", mac)
	}

	hosts, err := subnetHosts(subnet)
	if err != nil {
		return netip.Addr{}, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		found netip.Addr
	)

	next := make(chan netip.Addr)

	for range scanParallel {
		wg.Go(func() {
			for a := range next {
				if hasLink(ctx, a, want) {
					mu.Lock()
					found = a
					mu.Unlock()
					cancel()
				}
			}
		})
	}

feed:
	for _, a := range hosts {
		select {
		case next <- a:
		case <-ctx.Done():
			break feed
		}
	}

	close(next)
	wg.Wait()

	return found, nil
}

// subnetHosts are the host addresses of an IPv4 subnet (not the network and broadcast addresses
// of one larger than a /31).
func subnetHosts(subnet netip.Prefix) ([]netip.Addr, error) {
	subnet = subnet.Masked()
	if !subnet.Addr().Is4() {
		return nil, fmt.Errorf("%s is not an IPv4 subnet", subnet)
	}

	if size := 1 << (32 - subnet.Bits()); size-2 > MaxScanHosts {
		return nil, fmt.Errorf("%s holds %d addresses, more than the %d a scan covers; use a longer prefix", subnet, size, MaxScanHosts)
	}

	var hosts []netip.Addr
	for a := subnet.Addr(); subnet.Contains(a); a = a.Next() {
		hosts = append(hosts, a)
	}

	if len(hosts) > 2 {
		hosts = hosts[1 : len(hosts)-1]
	}

	return hosts, nil
}

// hasLink tells whether the Talos API at a answers without a client certificate (maintenance
// mode) and lists a link with the hardware address want.
func hasLink(ctx context.Context, a netip.Addr, want net.HardwareAddr) bool {
	endpoint := net.JoinHostPort(a.String(), fmt.Sprint(constants.ApidPort))

	conn, err := (&net.Dialer{Timeout: scanDialTimeout}).DialContext(ctx, "tcp", endpoint)
	if err != nil {
		return false
	}
	_ = conn.Close()

	ctx, cancel := context.WithTimeout(ctx, scanReadTimeout)
	defer cancel()

	c, err := client.New(ctx, client.WithEndpoints(a.String()),
		client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // maintenance mode has no trusted certificate
	if err != nil {
		return false
	}
	defer c.Close() //nolint:errcheck

	links, err := safe.StateListAll[*network.LinkStatus](ctx, c.COSI)
	if err != nil {
		return false
	}

	for l := range links.All() {
		if strings.EqualFold(net.HardwareAddr(l.TypedSpec().HardwareAddr).String(), want.String()) {
			return true
		}
	}

	return false
}

// ErrNotFound is returned by WaitForMAC when the time runs out.
var ErrNotFound = errors.New("no Talos node with that MAC address answered")

// WaitForMAC repeats FindByMAC every second until a node answers or timeout passes, calling
// progress after each sweep with the elapsed time. A sweep under way when timeout passes is
// finished first.
func WaitForMAC(ctx context.Context, subnet netip.Prefix, mac string, timeout time.Duration, progress func(time.Duration)) (netip.Addr, error) {
	start := time.Now()

	var found netip.Addr

	err := retry.Until(ctx, retry.Every(time.Second), func(ctx context.Context) (bool, error) {
		a, err := FindByMAC(ctx, subnet, mac)
		if err != nil || a.IsValid() {
			found = a
			return true, err
		}

		if progress != nil {
			progress(time.Since(start))
		}

		if time.Since(start) > timeout {
			return false, fmt.Errorf("%w after %s (scanned %s)", ErrNotFound, timeout, subnet)
		}

		return false, nil
	})

	return found, err
}
