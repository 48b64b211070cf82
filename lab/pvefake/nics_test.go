package pvefake

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

// TestNICsDualStackAndHotplug: a VM with several NICs (VLAN tag, MTU) and a dual-stack or
// IPv6-only ipconfig0 is created, started and given a NIC while it runs, then loses it, through
// both config endpoints, under the official schema of both PVE releases; the guest's NICs (MTUs
// as the bridge and the NIC's mtu make them) reach the lab as events, and the VM never stops.
func TestNICsDualStackAndHotplug(t *testing.T) {
	t.Parallel()

	for _, version := range pveschema.Versions() {
		t.Run(version, func(t *testing.T) {
			t.Parallel()

			sch, err := pveschema.Load(version)
			if err != nil {
				t.Fatal(err)
			}

			var (
				mu     sync.Mutex
				events []Event
			)

			s := start(t, Options{Schema: sch, Version: releases[version], BridgeMTU: map[string]int{"vmbr1": 9000}, OnEvent: func(e Event) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}})
			c := newClient(t, s)

			createTalosVM(t, c, "scsi0", "local-lvm:8",
				"net0", "virtio=BC:24:11:AA:BB:01,bridge=vmbr0",
				"net1", "virtio=BC:24:11:AA:BB:02,bridge=vmbr1,tag=20,mtu=9000",
				"ipconfig0", "ip=127.0.67.11/24,gw=127.0.67.1,ip6=fd1a:b:67::11/64,gw6=fd1a:b:67::1")

			conf := c.ok("GET", "nodes/pve1/qemu/100/config", nil).dataMap(t)
			if conf["net1"] != "virtio=BC:24:11:AA:BB:02,bridge=vmbr1,mtu=9000,tag=20" ||
				conf["ipconfig0"] != "ip=127.0.67.11/24,gw=127.0.67.1,ip6=fd1a:b:67::11/64,gw6=fd1a:b:67::1" {
				t.Fatalf("config: net1 %v, ipconfig0 %v", conf["net1"], conf["ipconfig0"])
			}

			if exit := c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string)); exit != "OK" {
				t.Fatalf("start: %s", exit)
			}

			// The guest agent reports both families on eth0 and the second NIC.
			res := c.ok("GET", "nodes/pve1/qemu/100/agent/network-get-interfaces", nil).dataMap(t)["result"].([]any)
			if len(res) != 3 || !strings.Contains(toJSON(t, res[1]), `"fd1a:b:67::11"`) || !strings.Contains(toJSON(t, res[2]), "bc:24:11:aa:bb:02") {
				t.Fatalf("agent interfaces = %s", toJSON(t, res))
			}

			// Hot-plug a NIC with a synchronous update, then one more through a qmconfig task.
			c.ok("PUT", "nodes/pve1/qemu/100/config", form("net2", "virtio=BC:24:11:AA:BB:03,bridge=vmbr1,mtu=1"))

			upid := c.ok("POST", "nodes/pve1/qemu/100/config", form("net3", "model=virtio,bridge=vmbr0")).data().(string)
			if exit := c.waitTask("pve1", upid); exit != "OK" {
				t.Fatalf("POST config: %s", exit)
			}

			// A NIC whose MTU exceeds its bridge's is not plugged: PVE's parameter error.
			r := c.do("PUT", "nodes/pve1/qemu/100/config", form("net4", "virtio=BC:24:11:AA:BB:05,bridge=vmbr0,mtu=9000"))
			if r.Code != 400 || r.Body["errors"].(map[string]any)["net4"] != "hotplug problem - netdev net4: MTU '9000' is bigger than the bridge MTU '1500'\n" {
				t.Fatalf("oversized MTU hot-plug: %d %v", r.Code, r.Body)
			}

			// And one goes.
			c.ok("PUT", "nodes/pve1/qemu/100/config", form("delete", "net1"))

			if st := c.ok("GET", "nodes/pve1/qemu/100/status/current", nil).dataMap(t); st["status"] != "running" {
				t.Fatalf("the VM stopped: %v", st)
			}

			conf = c.ok("GET", "nodes/pve1/qemu/100/config", nil).dataMap(t)
			if conf["net1"] != nil || conf["net4"] != nil || !strings.HasPrefix(conf["net3"].(string), "virtio=BC:24:11:") {
				t.Fatalf("config after hot-plugs: %v", conf)
			}

			if v := s.SchemaViolations(); len(v) != 0 {
				t.Fatalf("schema violations: %q", v)
			}

			_ = s.Close()

			var got []string

			for _, e := range events {
				var nics []string
				for _, n := range e.NICs {
					nics = append(nics, n.Key+"/"+n.Bridge+"/"+itoa(n.MTU)+"/"+itoa(n.Tag))
				}

				got = append(got, string(e.Type)+" "+strings.Join(nics, ","))
			}

			want := []string{
				"created net0/vmbr0/1500/0,net1/vmbr1/9000/20",
				"started net0/vmbr0/1500/0,net1/vmbr1/9000/20",
				"nics-changed net0/vmbr0/1500/0,net1/vmbr1/9000/20,net2/vmbr1/9000/0",
				"nics-changed net0/vmbr0/1500/0,net1/vmbr1/9000/20,net2/vmbr1/9000/0,net3/vmbr0/1500/0",
				"nics-changed net0/vmbr0/1500/0,net2/vmbr1/9000/0,net3/vmbr0/1500/0",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestNICMTUChecksAtStart: qemu-server refuses to start a VM whose virtio NIC's MTU exceeds its
// bridge's or lies below IPv4's minimum; an IPv6-only guest's agent reports its IPv6 address.
func TestNICMTUChecksAtStart(t *testing.T) {
	t.Parallel()

	sch, err := pveschema.Load("9")
	if err != nil {
		t.Fatal(err)
	}

	s := start(t, Options{Schema: sch, Version: releases["9"]})
	c := newClient(t, s)

	createTalosVM(t, c, "scsi0", "local-lvm:8", "net1", "virtio=BC:24:11:AA:BB:02,bridge=vmbr1,mtu=9000",
		"ipconfig0", "ip6=fd1a:b:67::11/64,gw6=fd1a:b:67::1")

	exit := c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string))
	if exit != "netdev net1: MTU '9000' is bigger than the bridge MTU '1500'" {
		t.Fatalf("start with an oversized MTU: %q", exit)
	}

	c.ok("PUT", "nodes/pve1/qemu/100/config", form("net1", "virtio=BC:24:11:AA:BB:02,bridge=vmbr1,mtu=500"))

	exit = c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string))
	if exit != "netdev net1: MTU '500' is smaller than the IP minimum MTU '576'" {
		t.Fatalf("start with a tiny MTU: %q", exit)
	}

	c.ok("PUT", "nodes/pve1/qemu/100/config", form("delete", "net1"))

	if exit := c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string)); exit != "OK" {
		t.Fatalf("start: %q", exit)
	}

	res := c.ok("GET", "nodes/pve1/qemu/100/agent/network-get-interfaces", nil).dataMap(t)["result"].([]any)
	if len(res) != 2 || !strings.Contains(toJSON(t, res[1]), `"ip-address":"fd1a:b:67::11","ip-address-type":"ipv6","prefix":64`) {
		t.Fatalf("agent interfaces = %s", toJSON(t, res))
	}

	if v := s.SchemaViolations(); len(v) != 0 {
		t.Fatalf("schema violations: %q", v)
	}
}

// releases are the PVE releases of the vendored schemas (as lab.go pairs them).
var releases = map[string]string{"9": "9.1.3", "8.4": "8.4.1"}

func toJSON(t *testing.T, v any) string {
	t.Helper()

	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}

	return string(b)
}

func itoa(i int) string { return strconv.Itoa(i) }
