//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/safe"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/client/config"
	configtypes "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	talosconfigres "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/netns"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
)

// dualStackProgram is a dual-stack cluster of three control planes behind an IPv4 VIP and two
// workers whose second network is a storage network: two Proxmox NICs on vmbr1 bonded in Talos
// with jumbo frames. Talos v1.12 (network documents).
func dualStackProgram(l *lab.Lab) string {
	ip6 := func(host int) string { return dualIP6(host).String() }

	return fmt.Sprintf(`name: dual
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  dual:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: dual
      talosVersion: v1.12.4
      vip: %[1]s
      network:
        gateway: %[2]s
        gateway6: %[3]s
        podSubnets: [10.244.0.0/16, "fd00:10:244::/56"]
        serviceSubnets: [10.96.0.0/12, "fd00:10:96::/112"]
      image:
        factoryUrl: ${factoryUrl}
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[4]s, ip6: "%[5]s"}
        cp-2: {hostNode: pve2, role: controlplane, ip: %[6]s, ip6: "%[7]s"}
        cp-3: {hostNode: pve3, role: controlplane, ip: %[8]s, ip6: "%[9]s"}
        worker-1:
          hostNode: pve1
          role: worker
          ip: %[10]s
          ip6: "%[11]s"
          networks:
            - {}
            - {bridge: vmbr1, addresses: [10.50.0.21/24], bond: {interfaces: 2, mtu: 9000}}
        worker-2:
          hostNode: pve2
          role: worker
          ip: %[12]s
          ip6: "%[13]s"
          networks:
            - {}
            - {bridge: vmbr1, addresses: [10.50.0.22/24], bond: {interfaces: 2, mtu: 9000}}
outputs:
  kubeconfig: ${dual.kubeconfig}
  talosconfig: ${dual.talosconfig}
`, l.Address(10), l.Address(1), ip6(1), l.Address(11), ip6(11), l.Address(12), ip6(12), l.Address(13), ip6(13),
		l.Address(21), ip6(21), l.Address(22), ip6(22))
}

// dualIP6 is the IPv6 address of the dual-stack cluster's host h: fd1a:b:0:68::<h>, whose last
// group reads as the last octet of its IPv4 address 127.0.68.<h>.
func dualIP6(h int) netip.Addr {
	x, _ := strconv.ParseUint(strconv.Itoa(h), 16, 16)

	return netns.Addr(0x68, int(x))
}

// TestDualStackClusterWithBondedStorage: every node's applied configuration holds its addresses
// of both families on the cluster link and, on the workers, the bond of two NICs with MTU 9000;
// the Nodes report an InternalIP of each family (IPv4 first); etcd's peers and the Kubernetes
// endpoint use IPv4, the declared first family; the workers' links and addresses are what Talos
// made of the VMs' NICs. Adding a third network to a running worker updates its VM in place
// (Proxmox hot-plugs the NIC): no replacement, no reboot, the configuration applies live, and the
// node has the new link with its address. The preview after is clean.
func TestDualStackClusterWithBondedStorage(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 68, PVE: func(o *pvefake.Options) {
		o.BridgeMTU = map[string]int{"vmbr1": 9000, "vmbr2": 1500}
	}}, dualStackProgram)

	mustRun(t, p, "up", "--yes", "--skip-preview")

	kubeconfig := mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets")
	if !strings.Contains(kubeconfig, "server: https://"+l.Address(10)+":6443") {
		t.Errorf("the kubeconfig does not use the IPv4 VIP:\n%s", kubeconfig)
	}

	kc := kubeClient(t, kubeconfig)
	nodes, err := kc.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 5 {
		t.Fatalf("Nodes: %v (%d)", err, len(nodes.Items))
	}

	host := map[string]int{"cp-1": 11, "cp-2": 12, "cp-3": 13, "worker-1": 21, "worker-2": 22}

	for _, n := range nodes.Items {
		var internal []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}

		if want := []string{l.Address(host[n.Name]), dualIP6(host[n.Name]).String()}; !slices.Equal(internal, want) {
			t.Errorf("Node %s InternalIPs = %v, want %v (one per family, IPv4 first)", n.Name, internal, want)
		}
	}

	c := talosClient(t, mustRun(t, p, "stack", "output", "talosconfig", "--show-secrets"))

	for name, h := range host {
		checkAppliedNetwork(t, c, l.Address(h), name, strings.HasPrefix(name, "worker"))
	}

	members, err := c.EtcdMemberList(client.WithNode(t.Context(), l.Address(11)), &machineapi.EtcdMemberListRequest{})
	if err != nil {
		t.Fatal(err)
	}

	for _, m := range members.GetMessages()[0].GetMembers() {
		for _, u := range m.GetPeerUrls() {
			if !strings.HasPrefix(u, "https://127.0.68.") {
				t.Errorf("etcd member %s advertises %s, not its IPv4 address", m.GetHostname(), u)
			}
		}
	}

	for _, w := range []string{"worker-1", "worker-2"} {
		wantLinks(t, c, l.Address(host[w]), map[string]string{
			"bond0": "mtu=9000", "eth1": "mtu=9000 master=bond0", "eth2": "mtu=9000 master=bond0",
		}, []string{
			fmt.Sprintf("bond0/10.50.0.%d/24", host[w]), fmt.Sprintf("eth0/%s/24", l.Address(host[w])),
			fmt.Sprintf("eth0/%s/64", dualIP6(host[w])),
		})
	}

	// A third network on a running worker: the VM is updated in place, the node applies it live.
	boots := bootIDs(t, l)

	editProgram(t, e, "            - {bridge: vmbr1, addresses: [10.50.0.22/24], bond: {interfaces: 2, mtu: 9000}}\n",
		"            - {bridge: vmbr1, addresses: [10.50.0.22/24], bond: {interfaces: 2, mtu: 9000}}\n"+
			"            - {bridge: vmbr2, addresses: [10.60.0.22/24]}\n")

	changes := previewChanges(t, p, "proxmoxve:VM/virtualMachine:VirtualMachine")
	if got := changes["proxmoxve:VM/virtualMachine:VirtualMachine"]; !slices.Equal(got, []string{"update dual-worker-2"}) {
		t.Errorf("adding a NIC to worker-2 would do %v to the VMs, want an update of worker-2's in place", got)
	}

	if preview := mustRun(t, p, "preview", "--diff"); !strings.Contains(preview, "worker-2: configuration changes:") ||
		!strings.Contains(preview, "applies live") || strings.Contains(preview, "reboot") {
		t.Errorf("the preview does not say worker-2's new network applies live:\n%s", preview)
	}

	mustRun(t, p, "up", "--yes", "--skip-preview")

	if after := bootIDs(t, l); !maps.Equal(after, boots) {
		t.Errorf("boot ids changed when a NIC was added: %v before, %v after", boots, after)
	}

	wantLinks(t, c, l.Address(22), map[string]string{"eth3": "mtu=1500"}, []string{"eth3/10.60.0.22/24"})

	mustRun(t, p, "preview", "--expect-no-changes")

	// A first extra network on a node whose one NIC has the MAC Proxmox chose: the preview
	// refuses and names that MAC, which the node must keep (Talos then selects NICs by MAC).
	cp3 := `cp-3: {hostNode: pve3, role: controlplane, ip: ` + l.Address(13) + `, ip6: "` + dualIP6(13).String() + `"`
	editProgram(t, e, cp3+"}", cp3+", networks: [{}, {bridge: vmbr2, addresses: [10.60.0.13/24]}]}")

	var mac string
	for _, v := range l.PVE.VMs() {
		if v.Name == "cp-3" {
			net0 := v.Config["net0"] // "virtio=BC:24:11:…,bridge=vmbr0"
			mac = net0[strings.Index(net0, "=")+1 : strings.Index(net0, ",")]
		}
	}

	if out, err := p.Run(t.Context(), "preview"); err == nil || !strings.Contains(out, "nodes.cp-3.networks: the VM's cluster NIC (net0) has MAC "+mac) ||
		!strings.Contains(out, `set macAddress: "`+mac+`"`) {
		t.Errorf("a first extra network without the cluster NIC's MAC: %v\n%s", err, out)
	}
}

// ipv6OnlyProgram is an IPv6-only cluster: one control plane behind an IPv6 VIP and one worker,
// IPv6 pods and services, Talos v1.11 (machine.network.interfaces).
func ipv6OnlyProgram(*lab.Lab) string {
	return fmt.Sprintf(`name: six
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  six:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: six
      talosVersion: v1.11.5
      vip: "%[1]s"
      network:
        gateway6: "%[2]s"
        podSubnets: ["fd00:10:244::/56"]
        serviceSubnets: ["fd00:10:96::/112"]
      image:
        factoryUrl: ${factoryUrl}
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip6: "%[3]s"}
        worker-1: {hostNode: pve2, role: worker, ip6: "%[4]s"}
outputs:
  kubeconfig: ${six.kubeconfig}
  talosconfig: ${six.talosconfig}
`, netns.Addr(0x69, 0x10), netns.Addr(0x69, 1), netns.Addr(0x69, 0x11), netns.Addr(0x69, 0x21))
}

// TestIPv6OnlyCluster runs in a network namespace of its own (lab/netns), where the lab's IPv6
// prefix is local: the nodes listen on IPv6 addresses only, and the component reaches the Talos
// API, etcd and the Kubernetes API (on the IPv6 VIP) over IPv6. The Nodes report IPv6
// InternalIPs only; the preview after the `up` is clean; destroy removes every VM.
func TestIPv6OnlyCluster(t *testing.T) {
	t.Parallel()

	if netns.Run(t) {
		return
	}

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 69}, ipv6OnlyProgram)

	mustRun(t, p, "up", "--yes", "--skip-preview")

	kubeconfig := mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets")
	if want := "server: https://[" + netns.Addr(0x69, 0x10).String() + "]:6443"; !strings.Contains(kubeconfig, want) {
		t.Errorf("the kubeconfig does not use the IPv6 VIP (%s):\n%s", want, kubeconfig)
	}

	nodes, err := kubeClient(t, kubeconfig).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 2 {
		t.Fatalf("Nodes: %v (%d)", err, len(nodes.Items))
	}

	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && !strings.HasPrefix(a.Address, "fd1a:b:0:69::") {
				t.Errorf("Node %s has InternalIP %s, not an IPv6 address of the node subnet", n.Name, a.Address)
			}
		}
	}

	c := talosClient(t, mustRun(t, p, "stack", "output", "talosconfig", "--show-secrets"))
	checkAppliedNetwork(t, c, netns.Addr(0x69, 0x11).String(), "cp-1", false)

	mustRun(t, p, "preview", "--expect-no-changes")
	mustRun(t, p, "destroy", "--yes", "--skip-preview")

	if vms := l.PVE.VMs(); len(vms) != 0 {
		t.Errorf("destroy left %d VMs", len(vms))
	}
}

// talosClient is a Talos API client from a talosconfig.
func talosClient(t *testing.T, talosconfig string) *client.Client {
	t.Helper()

	cfg, err := config.FromString(talosconfig)
	if err != nil {
		t.Fatal(err)
	}

	c, err := client.New(t.Context(), client.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = c.Close() })

	return c
}

// checkAppliedNetwork reads the configuration node (at addr) runs and checks its network through
// Talos' accessors: the cluster link holds an address of each family the cluster has, and a
// worker with a storage network has its bond of two NICs with MTU 9000.
func checkAppliedNetwork(t *testing.T, c *client.Client, addr, name string, bonded bool) {
	t.Helper()

	mc, err := safe.StateGetByID[*talosconfigres.MachineConfig](client.WithNode(t.Context(), addr), c.COSI, talosconfigres.ActiveID)
	if err != nil {
		t.Fatalf("%s's configuration: %v", name, err)
	}

	raw, err := mc.Provider().Bytes()
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := configloader.NewFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}

	var addrs []string

	if devs := cfg.Machine().Network().Devices(); len(devs) > 0 { // contract v1.11
		addrs = devs[0].Addresses()
	}

	var bonds []configtypes.NetworkBondConfig

	for _, l := range cfg.NetworkCommonLinkConfigs() {
		if l.Name() == "net0" {
			for _, a := range l.Addresses() {
				addrs = append(addrs, a.Address().String())
			}
		}

		if b, ok := l.(configtypes.NetworkBondConfig); ok {
			bonds = append(bonds, b)
		}
	}

	if !slices.ContainsFunc(addrs, func(a string) bool { return strings.HasPrefix(a, addr+"/") }) {
		t.Errorf("%s's cluster link has %v, not its address %s", name, addrs, addr)
	}

	switch {
	case !bonded && len(bonds) > 0:
		t.Errorf("%s has bonds %v", name, bonds)
	case bonded && (len(bonds) != 1 || len(bonds[0].Links()) != 2 || bonds[0].MTU().ValueOrZero() != 9000):
		t.Errorf("%s: want one bond of two NICs with MTU 9000, got %d bonds", name, len(bonds))
	}
}

// wantLinks checks the node's links (LinkStatus: MTU and bond master) and that its addresses
// (AddressStatus ids, "<link>/<address>/<bits>") include want.
func wantLinks(t *testing.T, c *client.Client, addr string, links map[string]string, addresses []string) {
	t.Helper()

	ctx := client.WithNode(t.Context(), addr)

	all, err := safe.StateListAll[*network.LinkStatus](ctx, c.COSI)
	if err != nil {
		t.Fatal(err)
	}

	index, got := map[uint32]string{}, map[string]string{}
	for l := range all.All() {
		index[l.TypedSpec().Index] = l.Metadata().ID()
	}

	for l := range all.All() {
		s := fmt.Sprintf("mtu=%d", l.TypedSpec().MTU)
		if m := l.TypedSpec().MasterIndex; m != 0 {
			s += " master=" + index[m]
		}

		got[l.Metadata().ID()] = s
	}

	for name, want := range links {
		if got[name] != want {
			t.Errorf("%s link %s: %q, want %q (links: %v)", addr, name, got[name], want, got)
		}
	}

	as, err := safe.StateListAll[*network.AddressStatus](ctx, c.COSI)
	if err != nil {
		t.Fatal(err)
	}

	var ids []string
	for a := range as.All() {
		ids = append(ids, a.Metadata().ID())
	}

	for _, want := range addresses {
		if !slices.Contains(ids, want) {
			t.Errorf("%s has no address %s (addresses: %v)", addr, want, ids)
		}
	}
}
