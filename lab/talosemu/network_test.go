package talosemu_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// The MACs of the test VMs' NICs: net0 the cluster NIC, net1 and net2 a bond's, net3 a plain one.
const (
	mac0 = "bc:24:11:aa:bb:01"
	mac1 = "bc:24:11:aa:bb:02"
	mac2 = "bc:24:11:aa:bb:03"
	mac3 = "bc:24:11:aa:bb:04"
)

// fourNICs are a VM's NICs as hostemu hands them over: net0 with its cloud-init addresses
// (Proxmox prints MACs in upper case), net1 and net2 on a jumbo-frame bridge, net3 on a 1500 one.
func fourNICs(addrs ...netip.Prefix) []talosemu.NIC {
	return []talosemu.NIC{
		{MAC: strings.ToUpper(mac0), MTU: 1500, Bridge: "vmbr0", Addresses: addrs},
		{MAC: strings.ToUpper(mac1), MTU: 9000, Bridge: "vmbr1", VLAN: 20},
		{MAC: strings.ToUpper(mac2), MTU: 9000, Bridge: "vmbr1", VLAN: 20},
		{MAC: strings.ToUpper(mac3), MTU: 1500, Bridge: "vmbr2"},
	}
}

// links and addresses read through the machinery's COSI client, as `talosctl get links` and
// `talosctl get addresses` do.
func links(t *testing.T, ctx context.Context, c *client.Client) map[string]*network.LinkStatusSpec {
	t.Helper()

	list, err := safe.StateListAll[*network.LinkStatus](ctx, c.COSI)
	if err != nil {
		t.Fatalf("get links: %v", err)
	}

	out := map[string]*network.LinkStatusSpec{}
	for l := range list.All() {
		out[l.Metadata().ID()] = l.TypedSpec()
	}

	return out
}

func addresses(t *testing.T, ctx context.Context, c *client.Client) []string {
	t.Helper()

	list, err := safe.StateListAll[*network.AddressStatus](ctx, c.COSI)
	if err != nil {
		t.Fatalf("get addresses: %v", err)
	}

	var out []string
	for a := range list.All() {
		out = append(out, a.Metadata().ID())
	}

	slices.Sort(out)

	return out
}

func prefix(addr string, bits int) netip.Prefix {
	return netip.PrefixFrom(netip.MustParseAddr(addr), bits)
}

// In maintenance mode every NIC is a link and cloud-init's addresses sit on eth0, a dual-stack
// one too (its IPv6 address cannot be bound outside the lab's network namespace, which only
// costs that listener).
func TestLinksAndAddressesInMaintenance(t *testing.T) {
	t.Parallel()

	ip := nextHost()
	n := startNode(t, talosemu.Options{Address: ip, NICs: fourNICs(prefix(ip, 24), prefix("fd1a:b:0:77::11", 64))})
	c := insecureClient(t, n)
	ctx := nodeCtx(t, n)

	got := links(t, ctx, c)
	if len(got) != 5 || got["lo"] == nil || got["lo"].Type != nethelpers.LinkLoopbck {
		t.Fatalf("links = %v", got)
	}

	for i, want := range []struct {
		mac string
		mtu uint32
	}{{mac0, 1500}, {mac1, 9000}, {mac2, 9000}, {mac3, 1500}} {
		l := got[fmt.Sprintf("eth%d", i)]
		if l == nil || l.HardwareAddr.String() != want.mac || l.PermanentAddr.String() != want.mac || l.MTU != want.mtu ||
			l.Driver != "virtio_net" || l.Type != nethelpers.LinkEther || l.Kind != "" || !l.Physical() ||
			l.OperationalState != nethelpers.OperStateUp || l.Index != uint32(i+2) {
			t.Errorf("eth%d = %+v, want %s MTU %d", i, l, want.mac, want.mtu)
		}
	}

	want := []string{"eth0/" + ip + "/24", "eth0/fd1a:b:0:77::11/64", "lo/127.0.0.1/8", "lo/::1/128"}
	if got := addresses(t, ctx, c); !slices.Equal(got, want) {
		t.Fatalf("addresses = %v, want %v", got, want)
	}
}

// The v1alpha1 network of contracts up to v1.11, as the product writes it: the cluster NIC by MAC
// with both families, an active-backup bond over two NICs by MAC (one of them wrong: the bond has
// one member), jumbo frames where the NIC carries them and not where it does not, a DHCP NIC.
func TestV1Alpha1InterfacesBondsAndMTU(t *testing.T) {
	t.Parallel()

	ip, other := nextHost(), nextHost()
	n := startNode(t, talosemu.Options{Address: ip, NICs: fourNICs(prefix(ip, 24))})

	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1", fmt.Sprintf(`machine:
  network:
    interfaces:
      - deviceSelector: {hardwareAddr: "%s"}
        dhcp: false
        mtu: 1500
        addresses: ["%s/24", "%s/24", "fd1a:b:0:77::11/64"]
        routes: [{network: 0.0.0.0/0, gateway: 127.0.67.1}, {network: "::/0", gateway: "fd1a:b:0:77::1"}]
      - interface: bond1
        bond: {mode: active-backup, deviceSelectors: [{hardwareAddr: "%s"}, {hardwareAddr: "bc:24:11:ff:ff:ff"}]}
        mtu: 9000
        dhcp: false
        addresses: ["10.50.0.11/24"]
      - deviceSelector: {hardwareAddr: "%s"}
        mtu: 9000
        dhcp: true
`, mac0, ip, other, mac1, mac3)))

	c := secureClient(t, n)
	ctx := nodeCtx(t, n)
	got := links(t, ctx, c)

	bond := got["bond1"]
	if bond == nil || bond.Kind != "bond" || bond.BondMaster.Mode != nethelpers.BondModeActiveBackup || bond.MTU != 9000 ||
		bond.HardwareAddr.String() != mac1 || bond.Physical() {
		t.Fatalf("bond1 = %+v", bond)
	}

	if m := got["eth1"]; m.MasterIndex != bond.Index || m.SlaveKind != "bond" || m.MTU != 9000 {
		t.Errorf("eth1 (member) = %+v", m)
	}

	if m := got["eth2"]; m.MasterIndex != 0 || m.SlaveKind != "" {
		t.Errorf("eth2 (its selector named another MAC) = %+v", m)
	}

	if m := got["eth3"]; m.MTU != 1500 {
		t.Errorf("eth3: MTU %d; its NIC carries 1500, so 9000 must not stick", m.MTU)
	}

	want := []string{
		"bond1/10.50.0.11/24", "eth0/" + ip + "/24", "eth0/" + other + "/24", "eth0/fd1a:b:0:77::11/64", "lo/127.0.0.1/8", "lo/::1/128",
	}
	if got := addresses(t, ctx, c); !slices.Equal(got, want) {
		t.Fatalf("addresses = %v, want %v", got, want)
	}

	// The configured address the NIC holds answers too.
	if _, err := secureClientAt(t, other).Version(client.WithNode(ctx, other)); err != nil {
		t.Fatalf("the API at the configured address %s: %v", other, err)
	}
}

// secureClientAt is the admin client of an endpoint address.
func secureClientAt(t *testing.T, endpoint string) *client.Client {
	t.Helper()

	c, err := client.New(t.Context(), client.WithConfig(sharedBundle(t).ClientConfig(endpoint)), client.WithEndpoints(endpoint))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	return c
}

// A configuration whose cluster NIC selector names a MAC the VM lacks leaves its addresses on no
// link: an address only the configuration gave stops answering (its connections too), while
// cloud-init's stays, as Talos keeps its platform layer. Unplugging the NIC takes that one away.
func TestWrongMACLeavesTheLinkWithoutItsAddresses(t *testing.T) {
	t.Parallel()

	ip, moved := nextHost(), nextHost()
	n := startNode(t, talosemu.Options{Address: ip, NICs: fourNICs(prefix(ip, 24))})

	iface := func(mac string) string {
		return fmt.Sprintf("machine:\n  network:\n    interfaces:\n      - deviceSelector: {hardwareAddr: \"%s\"}\n        addresses: [\"%s/24\"]\n", mac, moved)
	}

	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1", iface(mac0)))

	ctx := nodeCtx(t, n)
	atMoved := secureClientAt(t, moved)

	if _, err := atMoved.Version(client.WithNode(ctx, moved)); err != nil {
		t.Fatalf("the API at the configured address: %v", err)
	}

	// Upper case never matches: Talos globs against the MAC it prints in lower case.
	_, err := secureClient(t, n).ApplyConfiguration(ctx, &machineapi.ApplyConfigurationRequest{
		Data: machineConfig(t, machine.TypeControlPlane, "cp-1", iface(strings.ToUpper(mac0))),
		Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT,
	})
	if err != nil {
		t.Fatal(err)
	}

	if got := addresses(t, ctx, secureClient(t, n)); slices.Contains(got, "eth0/"+moved+"/24") || !slices.Contains(got, "eth0/"+ip+"/24") {
		t.Fatalf("addresses = %v: want cloud-init's, not the configured one", got)
	}

	short, cancel := context.WithTimeout(client.WithNode(t.Context(), moved), 3*time.Second)
	defer cancel()

	if _, err := atMoved.Version(short); err == nil {
		t.Fatal("the API still answers at an address the node no longer holds")
	}

	if _, err := net.DialTimeout("tcp", net.JoinHostPort(moved, "50000"), time.Second); err == nil {
		t.Fatal("something still listens at the address the node lost")
	}

	// Hot-unplugging net0 takes cloud-init's address away too.
	n.SetNICs(fourNICs(prefix(ip, 24))[1:])

	if _, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "50000"), time.Second); err == nil {
		t.Fatal("the node answers at its own address without the NIC holding it")
	}
}

// Contract v1.12's documents: aliases by MAC, a LinkConfig with both families and jumbo frames,
// a bond of two aliased NICs, DHCP on a fourth; an alias whose selector matches every NIC names
// none, so its LinkConfig's address lands nowhere.
func TestV112DocumentsAliasesAndBonds(t *testing.T) {
	t.Parallel()

	ip, other := nextHost(), nextHost()
	nics := fourNICs(prefix(ip, 24))
	nics[0].MTU = 9000
	n := startNode(t, talosemu.Options{Address: ip, NICs: nics, TalosVersion: "v1.12.4"})

	alias := func(name, mac string) string {
		return fmt.Sprintf("apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: %s\nselector:\n  match: mac(link.permanent_addr) == %q\n", name, mac)
	}

	docs := strings.Join([]string{
		alias("net0", mac0), alias("net1", mac1), alias("net2", mac2), alias("net3", mac3),
		"apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: any\nselector:\n  match: link.driver == \"virtio_net\"\n",
		fmt.Sprintf("apiVersion: v1alpha1\nkind: LinkConfig\nname: net0\nup: true\nmtu: 9000\naddresses:\n  - address: %s/24\n"+
			"  - address: fd1a:b:0:77::12/64\nroutes:\n  - gateway: 127.0.67.1\n  - destination: 10.60.0.0/16\n    gateway: 127.0.67.2\n", ip),
		"apiVersion: v1alpha1\nkind: BondConfig\nname: bond1\nlinks: [net1, net2]\nbondMode: active-backup\nup: true\nmtu: 9000\n" +
			"addresses:\n  - address: 10.50.0.12/24\n",
		"apiVersion: v1alpha1\nkind: DHCPv4Config\nname: net3\n",
		fmt.Sprintf("apiVersion: v1alpha1\nkind: LinkConfig\nname: any\nup: true\naddresses:\n  - address: %s/24\n", other),
	}, "---\n")

	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1", docs))

	c := secureClient(t, n)
	ctx := nodeCtx(t, n)
	got := links(t, ctx, c)

	for i, name := range []string{"net0", "net1", "net2", "net3"} {
		if l := got[fmt.Sprintf("eth%d", i)]; l.Alias != name {
			t.Errorf("eth%d alias %q, want %s", i, l.Alias, name)
		}
	}

	if l := got["eth0"]; l.MTU != 9000 {
		t.Errorf("eth0 MTU %d", l.MTU)
	}

	if b := got["bond1"]; b == nil || b.MTU != 9000 || got["eth1"].MasterIndex != b.Index || got["eth2"].MasterIndex != b.Index {
		t.Fatalf("bond1 = %+v, members %+v %+v", b, got["eth1"], got["eth2"])
	}

	want := []string{"bond1/10.50.0.12/24", "eth0/" + ip + "/24", "eth0/fd1a:b:0:77::12/64", "lo/127.0.0.1/8", "lo/::1/128"}
	if got := addresses(t, ctx, c); !slices.Equal(got, want) {
		t.Fatalf("addresses = %v, want %v (the ambiguous alias's address must land nowhere)", got, want)
	}
}

// Machinery's validation refuses a broken network document as Talos does.
func TestInvalidNetworkDocumentsAreRefused(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{})

	for _, doc := range []string{
		"apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: net0\nselector:\n  match: link.nosuchfield == 1\n",
		"apiVersion: v1alpha1\nkind: BondConfig\nname: bond1\nlinks: [net1]\nbondMode: sideways\n",
		"apiVersion: v1alpha1\nkind: LinkConfig\nname: net0\naddresses:\n  - address: 300.1.1.1/24\n",
		"apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: net%x\nselector:\n  match: link.driver == \"virtio_net\"\n",
		"apiVersion: v1alpha1\nkind: BondConfig\nname: bond1\nbondMode: active-backup\n",
		"apiVersion: v1alpha1\nkind: Layer2VIPConfig\nname: 127.0.67.10\n",
	} {
		_, err := insecureClient(t, n).ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{
			Data: machineConfigOrRaw(t, doc), Mode: machineapi.ApplyConfigurationRequest_AUTO,
		})
		if err == nil {
			t.Errorf("accepted:\n%s", doc)
		}

		t.Logf("refused: %v", err)
	}
}

// machineConfigOrRaw is a worker's configuration with doc appended as it is (a patch that does
// not even load is sent raw, as a client that writes YAML by hand would).
func machineConfigOrRaw(t *testing.T, doc string) []byte {
	t.Helper()

	cfg, err := sharedBundle(t).MachineConfig(machine.TypeWorker, doc)
	if err == nil {
		return cfg
	}

	return append(machineConfig(t, machine.TypeWorker, "w"), []byte("---\n"+doc)...)
}

// An IPv6-only node outside the lab's network namespace cannot listen, and says how to fix it.
func TestIPv6OnlyNodeNeedsTheNamespace(t *testing.T) {
	t.Parallel()

	if l, err := net.Listen("tcp", "[fd1a:b:0:77::99]:0"); err == nil {
		l.Close() //nolint:errcheck

		t.Skip("the lab's IPv6 prefix is bound here (inside lab/netns): TestIPv6OnlyClusterInTheNamespace covers IPv6-only nodes")
	}

	_, err := talosemu.Start(t.Context(), talosemu.Options{Address: "fd1a:b:0:77::99", Logf: t.Logf, Cluster: newCluster(t)})
	if !errors.Is(err, talosemu.ErrNoIPv6Namespace) || !strings.Contains(err.Error(), "lab/netns") {
		t.Fatalf("start = %v, want %v", err, talosemu.ErrNoIPv6Namespace)
	}

	if _, err := talosemu.Start(t.Context(), talosemu.Options{Address: "2001:db8::1"}); err == nil || !strings.Contains(err.Error(), talosemu.LabIPv6Prefix) {
		t.Fatalf("an address outside the lab's prefixes: %v", err)
	}
}
