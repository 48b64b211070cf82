package spec

import (
	"fmt"
	"strings"
	"testing"
)

// TestNetworksLayout: the cluster network is the VM's net0 whichever entry carries it, the
// others follow in order (a bond as several NICs), every NIC of a multi-NIC node has a MAC
// (derived when not given, the same on every build), and a node with one network entry keeps
// the MAC Proxmox chooses.
func TestNetworksLayout(t *testing.T) {
	t.Parallel()

	in := base()
	in.Nodes["w-1"] = NodeInput{HostNode: "pve1", Role: "worker", IP: "10.0.0.21", Networks: []NetworkDeviceInput{
		{Bridge: "vmbr2", DHCP: new(true)},
		{Bridge: "vmbr1", ClusterNetwork: new(true), VLANID: new(20), MTU: new(1450), MACAddress: "bc:24:11:00:00:21"},
		{Bridge: "vmbr3", Addresses: []string{"10.50.0.21/24"}, Bond: &BondInput{Interfaces: new(3), MTU: new(9000)}},
	}}
	in.Nodes["w-2"] = NodeInput{HostNode: "pve1", Role: "worker", IP: "10.0.0.22", Networks: []NetworkDeviceInput{{MTU: new(1400)}}}

	c, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}

	again, _ := Build(in)

	w1, w2 := c.Nodes[1], c.Nodes[2]

	var nics []string
	for _, n := range w1.NICs {
		nics = append(nics, fmt.Sprintf("%s/%d/%d", n.Bridge, n.VLANID, n.MTU))
	}

	if got := strings.Join(nics, " "); got != "vmbr1/20/1450 vmbr2/0/0 vmbr3/0/9000 vmbr3/0/9000 vmbr3/0/9000" {
		t.Errorf("w-1 NICs = %s", got)
	}

	var links []string
	for _, l := range w1.Links {
		links = append(links, fmt.Sprintf("%s%v:%s:%v", l.Name, l.NICs, l.BondMode, l.Cluster))
	}

	if got := strings.Join(links, " "); got != "net0[0]::true net1[1]::false bond0[2 3 4]:active-backup:false" {
		t.Errorf("w-1 links = %s", got)
	}

	if w1.MACAddress != "BC:24:11:00:00:21" || w1.Bridge != "vmbr1" || w1.VLANID != 20 {
		t.Errorf("w-1's cluster NIC = %s on %s/%d", w1.MACAddress, w1.Bridge, w1.VLANID)
	}

	for i, want := range []string{"", DeriveMAC("homelab", "w-1", "vmbr2/0", 1), DeriveMAC("homelab", "w-1", "vmbr3/0", 1),
		DeriveMAC("homelab", "w-1", "vmbr3/0", 2), DeriveMAC("homelab", "w-1", "vmbr3/0", 3)} {
		if n := w1.NICs[i]; i > 0 && (n.MACAddress != want || again.Nodes[1].NICs[i].MACAddress != n.MACAddress) {
			t.Errorf("w-1 net%d MAC = %s, want the derived, stable %s", i, n.MACAddress, want)
		}
	}

	// Without the DHCP network the bond's NICs move from net2-4 to net1-3 but keep their MACs.
	in.Nodes["w-1"] = NodeInput{HostNode: "pve1", Role: "worker", IP: "10.0.0.21", Networks: []NetworkDeviceInput{
		in.Nodes["w-1"].Networks[1], in.Nodes["w-1"].Networks[2],
	}}

	fewer, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}

	if got := fewer.Nodes[1].NICs[1].MACAddress; got != w1.NICs[2].MACAddress {
		t.Errorf("removing a network changed the bond's first MAC: %s, was %s", got, w1.NICs[2].MACAddress)
	}

	if len(w2.NICs) != 1 || w2.MACAddress != "" || w2.NICs[0].MTU != 1400 {
		t.Errorf("w-2 = %+v, want one NIC with MTU 1400 and no fixed MAC", w2.NICs)
	}

	if mac := DeriveMAC("homelab", "w-1", "vmbr2/0", 1); mac[:3] != "02:" || len(mac) != 17 {
		t.Errorf("derived MAC %s is not a locally administered unicast address", mac)
	}
}

// TestNodeDefaultsNetworksReportedOnce: a mistake in nodeDefaults.networks, which every node
// inherits, is one problem, not one per node.
func TestNodeDefaultsNetworksReportedOnce(t *testing.T) {
	t.Parallel()

	in := base()
	in.Nodes["w-1"] = NodeInput{HostNode: "pve1", Role: "worker", IP: "10.0.0.21"}
	in.NodeDefaults.Networks = []NetworkDeviceInput{{}, {Bridge: "vmbr1", MTU: new(100)}}

	_, err := Build(in)
	if err == nil || strings.Count(err.Error(), "nodeDefaults.networks[1].mtu") != 1 {
		t.Errorf("want nodeDefaults.networks[1].mtu reported once, got %v", err)
	}
}
