package pvefake

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// DefaultBridgeMTU is the MTU of a host bridge Options.BridgeMTU does not list (a Linux bridge's
// default, and vmbr0's on a fresh Proxmox VE host).
const DefaultBridgeMTU = 1500

// NIC is one of a VM's network devices (netN) as QEMU hands it to the guest.
type NIC struct {
	// Key is the configuration key ("net0", "net1", …); Index its number.
	Key   string
	Index int
	// Model is the device model ("virtio", "e1000", …).
	Model string
	// MAC is the device's address, upper case as PVE prints it ("BC:24:11:AA:BB:01").
	MAC    string
	Bridge string
	// Tag is the VLAN tag on the bridge (0: untagged).
	Tag int
	// MTU is the MTU the guest's NIC comes up with and cannot exceed: for a virtio NIC on a bridge,
	// its mtu, or the bridge's MTU when mtu is unset or 1 (qemu-server's host_mtu); 1500 for other
	// models, which ignore mtu.
	MTU      int
	LinkDown bool
}

// nicsOf reads the VM's NICs in index order and checks their MTUs as qemu-server's
// print_netdevice_full does when it builds the device (at start, and when it hot-plugs one): the
// error is PVE's wording, keyed by the NIC.
func (s *Server) nicsOf(conf map[string]string) ([]NIC, map[string]string) {
	var (
		out  []NIC
		errs map[string]string
	)

	for _, key := range slices.Sorted(maps.Keys(conf)) {
		if kd, _ := keyKind(key); kd != kNet {
			continue
		}

		n, msg := s.parseNIC(key, conf[key])
		if msg != "" {
			if errs == nil {
				errs = map[string]string{}
			}

			errs[key] = msg
		}

		out = append(out, n)
	}

	slices.SortFunc(out, func(a, b NIC) int { return a.Index - b.Index })

	return out, errs
}

// parseNIC reads one stored netN value ("virtio=BC:24:11:…,bridge=vmbr1,mtu=9000,tag=20").
func (s *Server) parseNIC(key, value string) (NIC, string) {
	idx, _ := strconv.Atoi(strings.TrimPrefix(key, "net"))
	n := NIC{Key: key, Index: idx, MAC: netMAC(value), MTU: DefaultBridgeMTU}

	props := map[string]string{}

	for _, part := range strings.Split(value, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}

		switch {
		case netModels[k]:
			n.Model = k
		case k == "model":
			n.Model = v
		default:
			props[k] = v
		}
	}

	n.Bridge = props["bridge"]
	n.Tag, _ = strconv.Atoi(props["tag"])
	n.LinkDown, _ = parseBool(props["link_down"])

	if n.Model != "virtio" || n.Bridge == "" {
		return n, "" // qemu-server warns and ignores mtu there
	}

	bridge := s.bridgeMTU(n.Bridge)
	n.MTU = bridge

	mtu, err := strconv.Atoi(props["mtu"])

	switch {
	case err != nil || mtu == 1:
	case mtu < 576:
		return n, fmt.Sprintf("netdev %s: MTU '%d' is smaller than the IP minimum MTU '576'", key, mtu)
	case mtu > bridge:
		return n, fmt.Sprintf("netdev %s: MTU '%d' is bigger than the bridge MTU '%d'", key, mtu, bridge)
	default:
		n.MTU = mtu
	}

	return n, ""
}

// bridgeMTU is a host bridge's MTU (Options.BridgeMTU, the same on every node).
func (s *Server) bridgeMTU(bridge string) int {
	if mtu, ok := s.opts.BridgeMTU[bridge]; ok && mtu > 0 {
		return mtu
	}

	return DefaultBridgeMTU
}

// hotplugNetwork reports whether the VM hot-plugs network devices: qemu-server's hotplug option,
// "network,disk,usb" by default ("1"), nothing with "0".
func hotplugNetwork(conf map[string]string) bool {
	v, ok := conf["hotplug"]
	if !ok || v == "1" {
		return true
	}

	return slices.Contains(strings.Split(v, ","), "network")
}

// firstError is the error of the lowest NIC, as qemu-server meets them building devices in order.
func firstError(errs map[string]string) string {
	keys := slices.SortedFunc(maps.Keys(errs), func(a, b string) int {
		x, _ := strconv.Atoi(strings.TrimPrefix(a, "net"))
		y, _ := strconv.Atoi(strings.TrimPrefix(b, "net"))

		return x - y
	})

	if len(keys) == 0 {
		return ""
	}

	return errs[keys[0]]
}

// hotplugNICs checks what a configuration update does to a running VM's NICs, as
// vmconfig_hotplug_pending does with network hot-plug on: a NIC added or changed must build (its
// MTU fits its bridge), else PVE answers 400 with "hotplug problem - …" for it. It reports
// whether the guest's NICs change. Callers hold s.mu.
func (s *Server) hotplugNICs(v *vm, next map[string]string) (bool, map[string]string) {
	if !v.running || !hotplugNetwork(v.config) {
		return false, nil
	}

	before, _ := s.nicsOf(v.config)
	after, errs := s.nicsOf(next)

	for key, msg := range errs {
		if v.config[key] == next[key] {
			delete(errs, key) // an unchanged NIC is not plugged again
			continue
		}

		errs[key] = "hotplug problem - " + msg
	}

	if len(errs) > 0 {
		return false, errs
	}

	return !slices.Equal(before, after), nil
}
