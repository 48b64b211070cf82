package hostemu

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/netns"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// ipconfig0 as the product writes it, per family, and what the node makes of it.
func TestNetworkFromIPConfig(t *testing.T) {
	t.Parallel()

	nics := []pvefake.NIC{
		{Key: "net0", Index: 0, MAC: "BC:24:11:AA:BB:01", Bridge: "vmbr0", MTU: 1500},
		{Key: "net1", Index: 1, MAC: "BC:24:11:AA:BB:02", Bridge: "vmbr1", Tag: 20, MTU: 9000},
	}

	for _, tc := range []struct {
		ipconfig0, ipconfig1 string
		primary              string
		eth0, eth1           string
		err                  string
	}{
		{ipconfig0: "ip=127.0.67.11/24,gw=127.0.67.1", primary: "127.0.67.11/24", eth0: "[127.0.67.11/24]"},
		{
			ipconfig0: "ip=127.0.67.11/24,gw=127.0.67.1,ip6=fd1a:b:0:67::11/64,gw6=fd1a:b:0:67::1", ipconfig1: "ip=10.50.0.11/24",
			primary: "127.0.67.11/24", eth0: "[127.0.67.11/24 fd1a:b:0:67::11/64]", eth1: "[10.50.0.11/24]",
		},
		{ipconfig0: "ip6=fd1a:b:0:67::11/64,gw6=fd1a:b:0:67::1", primary: "fd1a:b:0:67::11/64", eth0: "[fd1a:b:0:67::11/64]"},
		{ipconfig0: "ip=dhcp", primary: "127.0.100.1/24", eth0: "[127.0.100.1/24]"},
		{ipconfig0: "ip=127.0.67.11/24,ip6=auto", primary: "127.0.67.11/24", eth0: "[127.0.67.11/24]"},
		{ipconfig0: "ip6=dhcp", err: "no DHCPv6 server"},
		{ipconfig0: "ip=10.0.0.11/24", err: "not on loopback"},
		{ipconfig0: "ip6=fd1a:b:67::11/64", err: "not in the lab's IPv6 prefix fd1a:b::/48"},
		{ipconfig0: "ip6=2001:db8::11/64", err: "not in the lab's IPv6 prefix"},
		{ipconfig0: "", err: "no ipconfig0 address"},
	} {
		c := New(t.Context(), Options{})
		e := pvefake.Event{VMID: 100, IPConfig0: tc.ipconfig0, NICs: nics, Config: map[string]string{"ipconfig1": tc.ipconfig1}}

		primary, got, err := c.network(e)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.ipconfig0, err, tc.err)
			}

			continue
		}

		if err != nil || primary.String() != tc.primary || len(got) != 2 ||
			fmt.Sprint(got[0].Addresses) != tc.eth0 || (tc.eth1 != "" && fmt.Sprint(got[1].Addresses) != tc.eth1) ||
			got[1].MTU != 9000 || got[1].VLAN != 20 || got[0].MAC != "BC:24:11:AA:BB:01" {
			t.Errorf("%q: %v %+v %v, want %s with eth0 %s", tc.ipconfig0, primary, got, err, tc.primary, tc.eth0)
		}
	}
}

// A VM with two NICs boots a node with both links (the VM NIC's MTU), a NIC hot-plugged into the
// running VM appears on the node and an unplugged one goes, the VM running throughout; an
// IPv6-only VM outside the lab's network namespace reports why its node cannot start.
func TestNICsReachTheNode(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	ctrl := New(ctx, Options{Logf: t.Logf})
	defer ctrl.Close()

	fake, err := pvefake.Start(ctx, pvefake.Options{OnEvent: ctrl.Handle, Logf: t.Logf, BridgeMTU: map[string]int{"vmbr1": 9000}})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close() //nolint:errcheck

	ctrl.Attach(fake)
	api := newAPI(t, fake)

	api.call("POST", "nodes/pve1/qemu", url.Values{
		"vmid": {"100"}, "name": {"w-1"}, "scsi0": {"local-lvm:4"},
		"net0":      {"virtio=BC:24:11:AA:BB:01,bridge=vmbr0"},
		"net1":      {"virtio=BC:24:11:AA:BB:02,bridge=vmbr1,tag=20,mtu=9000"},
		"ipconfig0": {"ip=127.0.68.11/24,gw=127.0.68.1"},
	})
	api.call("POST", "nodes/pve1/qemu/100/status/start", nil)

	node := waitNode(t, ctrl, 100)
	c := maintenanceClient(t, node.IP())

	wantLinks(t, c, map[string]string{"eth0": "bc:24:11:aa:bb:01/1500", "eth1": "bc:24:11:aa:bb:02/9000"})

	api.call("PUT", "nodes/pve1/qemu/100/config", url.Values{"net2": {"virtio=BC:24:11:AA:BB:03,bridge=vmbr1"}})
	wantLinks(t, c, map[string]string{"eth0": "bc:24:11:aa:bb:01/1500", "eth1": "bc:24:11:aa:bb:02/9000", "eth2": "bc:24:11:aa:bb:03/9000"})

	api.call("PUT", "nodes/pve1/qemu/100/config", url.Values{"delete": {"net1"}})
	wantLinks(t, c, map[string]string{"eth0": "bc:24:11:aa:bb:01/1500", "eth1": "bc:24:11:aa:bb:03/9000"})

	// With network hot-plug off, a new NIC reaches the guest at its next (re)boot.
	// (The update that turns it off still hot-plugs: PVE reads the running value.)
	api.call("PUT", "nodes/pve1/qemu/100/config", url.Values{"hotplug": {"disk,usb"}})
	api.call("PUT", "nodes/pve1/qemu/100/config", url.Values{"net3": {"virtio=BC:24:11:AA:BB:04,bridge=vmbr0"}})
	time.Sleep(100 * time.Millisecond)
	wantLinks(t, c, map[string]string{"eth0": "bc:24:11:aa:bb:01/1500", "eth1": "bc:24:11:aa:bb:03/9000"})

	api.call("POST", "nodes/pve1/qemu/100/status/reboot", nil)
	wantLinks(t, c, map[string]string{"eth0": "bc:24:11:aa:bb:01/1500", "eth1": "bc:24:11:aa:bb:03/9000", "eth2": "bc:24:11:aa:bb:04/1500"})

	if ctrl.Nodes()[100] != node {
		t.Fatal("the hot-plug restarted the node")
	}

	if l, err := net.Listen("tcp", "[fd1a:b:0:68::11]:0"); err == nil {
		l.Close() //nolint:errcheck

		return // inside lab/netns: TestIPv6NodesInTheNamespace boots IPv6-only nodes
	}

	api.call("POST", "nodes/pve1/qemu", url.Values{
		"vmid": {"101"}, "name": {"w-2"}, "scsi0": {"local-lvm:4"}, "net0": {"virtio=BC:24:11:AA:BB:11,bridge=vmbr0"},
		"ipconfig0": {"ip6=fd1a:b:0:68::11/64,gw6=fd1a:b:0:68::1"},
	})
	api.call("POST", "nodes/pve1/qemu/101/status/start", nil)

	deadline := time.Now().Add(10 * time.Second)
	for !errors.Is(lastError(ctrl), talosemu.ErrNoIPv6Namespace) {
		if time.Now().After(deadline) {
			t.Fatalf("errors %v, want %v", ctrl.Errors(), talosemu.ErrNoIPv6Namespace)
		}

		time.Sleep(20 * time.Millisecond)
	}
}

func lastError(c *Controller) error {
	errs := c.Errors()
	if len(errs) == 0 {
		return nil
	}

	return errs[len(errs)-1]
}

func waitNode(t *testing.T, c *Controller, vmid int) *talosemu.Node {
	t.Helper()

	deadline := time.Now().Add(10 * time.Second)

	for {
		if n := c.Nodes()[vmid]; n != nil {
			return n
		}

		if time.Now().After(deadline) {
			t.Fatalf("VM %d has no node; errors %v", vmid, c.Errors())
		}

		time.Sleep(20 * time.Millisecond)
	}
}

func maintenanceClient(t *testing.T, ip string) *client.Client {
	t.Helper()

	c, err := client.New(t.Context(), client.WithEndpoints(ip), client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // maintenance mode
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	return c
}

// wantLinks waits until the node's physical links are want (name → "mac/mtu").
func wantLinks(t *testing.T, c *client.Client, want map[string]string) {
	t.Helper()

	deadline := time.Now().Add(10 * time.Second)

	for {
		list, err := safe.StateListAll[*network.LinkStatus](t.Context(), c.COSI)
		got := map[string]string{}

		if err == nil {
			for l := range list.All() {
				if l.TypedSpec().Physical() {
					got[l.Metadata().ID()] = fmt.Sprintf("%s/%d", l.TypedSpec().HardwareAddr, l.TypedSpec().MTU)
				}
			}
		}

		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("links %v (%v), want %v", got, err, want)
		}

		time.Sleep(20 * time.Millisecond)
	}
}

// api calls the fake as bpg does (token, form bodies) and waits for the tasks it starts.
type api struct {
	t     *testing.T
	base  string
	token string
	http  *http.Client
}

func newAPI(t *testing.T, fake *pvefake.Server) *api {
	return &api{t: t, base: fake.URL() + "/api2/json/", token: "PVEAPIToken=" + fake.APIToken(), http: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // the fake's self-signed certificate
	}}
}

func (a *api) call(method, path string, form url.Values) {
	a.t.Helper()

	req, err := http.NewRequestWithContext(a.t.Context(), method, a.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		a.t.Fatal(err)
	}

	req.Header.Set("Authorization", a.token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")

	res, err := a.http.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close() //nolint:errcheck

	var body struct {
		Data any `json:"data"`
	}

	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK {
		a.t.Fatalf("%s %s: %s %v", method, path, res.Status, err)
	}

	if upid, ok := body.Data.(string); ok && strings.HasPrefix(upid, "UPID:") {
		a.wait(upid)
	}
}

func (a *api) wait(upid string) {
	a.t.Helper()

	node := strings.Split(upid, ":")[1]
	deadline := time.Now().Add(10 * time.Second)

	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(a.t.Context(), http.MethodGet, a.base+"nodes/"+node+"/tasks/"+url.PathEscape(upid)+"/status", nil)
		req.Header.Set("Authorization", a.token)

		res, err := a.http.Do(req)
		if err != nil {
			a.t.Fatal(err)
		}

		var st struct {
			Data struct {
				Status     string `json:"status"`
				ExitStatus string `json:"exitstatus"`
			} `json:"data"`
		}

		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close() //nolint:errcheck

		if err == nil && st.Data.Status == "stopped" {
			if st.Data.ExitStatus != "OK" {
				a.t.Fatalf("task %s: %s", upid, st.Data.ExitStatus)
			}

			return
		}

		time.Sleep(20 * time.Millisecond)
	}

	a.t.Fatalf("task %s still running", upid)
}

// Inside the lab's network namespace an IPv6-only VM's node answers at its ip6, a dual-stack VM's
// at both of its addresses.
func TestIPv6NodesInTheNamespace(t *testing.T) {
	if netns.Run(t) {
		return
	}

	ctrl := New(t.Context(), Options{Logf: t.Logf})
	defer ctrl.Close()

	fake, err := pvefake.Start(t.Context(), pvefake.Options{OnEvent: ctrl.Handle, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close() //nolint:errcheck

	ctrl.Attach(fake)
	api := newAPI(t, fake)

	v6, dual := netns.Addr(0x68, 0x11), netns.Addr(0x68, 0x12)

	for vmid, ipconfig0 := range map[int]string{
		100: "ip6=" + v6.String() + "/64,gw6=" + netns.Addr(0x68, 1).String(),
		101: "ip=127.0.69.12/24,gw=127.0.69.1,ip6=" + dual.String() + "/64",
	} {
		id := fmt.Sprint(vmid)
		api.call("POST", "nodes/pve1/qemu", url.Values{
			"vmid": {id}, "name": {"n-" + id}, "scsi0": {"local-lvm:4"}, "net0": {"model=virtio,bridge=vmbr0"}, "ipconfig0": {ipconfig0},
		})
		api.call("POST", "nodes/pve1/qemu/"+id+"/status/start", nil)
	}

	if n := waitNode(t, ctrl, 100); n.IP() != v6.String() {
		t.Fatalf("the IPv6-only node is at %s", n.IP())
	}

	waitNode(t, ctrl, 101)

	for _, ip := range []string{v6.String(), "127.0.69.12", dual.String()} {
		wantLinks(t, maintenanceClient(t, ip), map[string]string{"eth0": eth0Of(t, ctrl, ip)})
	}
}

// eth0Of is the eth0 "mac/mtu" of the node at ip.
func eth0Of(t *testing.T, c *Controller, ip string) string {
	t.Helper()

	for _, n := range c.Nodes() {
		for _, nic := range n.NICs() {
			for _, a := range nic.Addresses {
				if a.Addr().String() == ip {
					return strings.ToLower(nic.MAC) + "/1500"
				}
			}
		}
	}

	t.Fatalf("no node holds %s", ip)

	return ""
}
