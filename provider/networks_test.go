package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// TestConstructNetworks: a dual-stack cluster whose worker has a bonded storage network. The VM
// gets one Proxmox NIC per bonded interface on the storage bridge with its MTU and a derived MAC
// (the cluster NIC first, with its own MAC), and cloud-init addresses the cluster NIC in both
// families.
func TestConstructNetworks(t *testing.T) {
	t.Parallel()

	r := &recorder{}
	_, err := construct(t, r, "dual", inputsFromJSON(t, `{
	  "clusterName": "dual", "talosVersion": "v1.12.4", "vip": "10.0.0.10",
	  "network": {"gateway": "10.0.0.1", "gateway6": "fd00:1::1",
	    "podSubnets": ["10.244.0.0/16", "fd00:10:244::/56"], "serviceSubnets": ["10.96.0.0/12", "fd00:10:96::/112"]},
	  "nodes": {
	    "cp-1": {"hostNode": "pve1", "role": "controlplane", "ip": "10.0.0.11", "ip6": "fd00:1::11", "mtu": 1500},
	    "w-1": {"hostNode": "pve2", "role": "worker", "ip": "10.0.0.21", "ip6": "fd00:1::21", "networks": [
	      {"vlanId": 20},
	      {"bridge": "vmbr1", "addresses": ["10.50.0.21/24"], "bond": {"mode": "802.3ad", "interfaces": 2, "mtu": 9000}}
	    ]}
	  }
	}`))
	if err != nil {
		t.Fatal(err)
	}

	w1 := r.named("dual-w-1")
	nics := w1.Inputs.Get("networkDevices").AsArray()

	if nics.Len() != 3 {
		t.Fatalf("w-1 has %d NICs, want the cluster NIC and two bonded ones", nics.Len())
	}

	for i, want := range []struct {
		bridge    string
		vlan, mtu float64
		mac       string
	}{
		{"vmbr0", 20, 0, spec.DeriveMAC("dual", "w-1", "vmbr0/20", 1)},
		{"vmbr1", 0, 9000, spec.DeriveMAC("dual", "w-1", "vmbr1/0", 1)},
		{"vmbr1", 0, 9000, spec.DeriveMAC("dual", "w-1", "vmbr1/0", 2)},
	} {
		nic := nics.Get(i).AsMap()

		got := fmt.Sprintf("%s vlan=%v mtu=%v mac=%s", nic.Get("bridge").AsString(), number(nic.Get("vlanId")), number(nic.Get("mtu")),
			nic.Get("macAddress").AsString())
		wantLine := fmt.Sprintf("%s vlan=%v mtu=%v mac=%s", want.bridge, want.vlan, want.mtu, want.mac)

		if got != wantLine {
			t.Errorf("w-1 net%d = %s, want %s", i, got, wantLine)
		}
	}

	cp1 := r.named("dual-cp-1")
	if got := cp1.Inputs.Get("networkDevices").AsArray(); got.Len() != 1 || got.Get(0).AsMap().Get("macAddress").IsString() ||
		number(got.Get(0).AsMap().Get("mtu")) != 1500 {
		t.Errorf("cp-1's one NIC = %v, want MTU 1500 and a MAC Proxmox chooses", got)
	}

	ipc := cp1.Inputs.Get("initialization").AsMap().Get("ipConfigs").AsArray().Get(0).AsMap()
	v4, v6 := ipc.Get("ipv4").AsMap(), ipc.Get("ipv6").AsMap()

	if v4.Get("address").AsString() != "10.0.0.11/24" || v6.Get("address").AsString() != "fd00:1::11/64" || v6.Get("gateway").AsString() != "fd00:1::1" {
		t.Errorf("cloud-init = %v, want both families on the cluster NIC", ipc)
	}
}

// TestConstructIPv6Only: without IPv4 the cloud-init drive holds only the IPv6 address, and the
// endpoint is the IPv6 VIP in brackets.
func TestConstructIPv6Only(t *testing.T) {
	t.Parallel()

	r := &recorder{}
	resp, err := construct(t, r, "six", inputsFromJSON(t, `{
	  "clusterName": "six", "talosVersion": "v1.13.2", "vip": "fd00:1::10",
	  "network": {"gateway6": "fd00:1::1", "podSubnets": ["fd00:10:244::/56"], "serviceSubnets": ["fd00:10:96::/112"]},
	  "nodes": {"cp-1": {"hostNode": "pve1", "role": "controlplane", "ip6": "fd00:1::11"}}
	}`))
	if err != nil {
		t.Fatal(err)
	}

	ipc := r.named("six-cp-1").Inputs.Get("initialization").AsMap().Get("ipConfigs").AsArray().Get(0).AsMap()
	if ipc.Get("ipv4").IsMap() || ipc.Get("ipv6").AsMap().Get("address").AsString() != "fd00:1::11/64" {
		t.Errorf("cloud-init = %v, want the IPv6 address only", ipc)
	}

	if got := resp.State.Get("endpoint").AsString(); got != "https://[fd00:1::10]:6443" {
		t.Errorf("endpoint = %q", got)
	}

	if !strings.Contains(r.named("six-cp-1-config").Inputs.Get("machineConfigurationInput").AsString(), "fd00:1::11/64") {
		t.Errorf("cp-1's configuration does not address it at fd00:1::11/64")
	}
}

// number is a property's number, 0 when it is unset.
func number(v interface {
	IsNumber() bool
	AsNumber() float64
}) float64 {
	if !v.IsNumber() {
		return 0
	}

	return v.AsNumber()
}
