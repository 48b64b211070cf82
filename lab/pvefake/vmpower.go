package pvefake

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var resizeSizeRE = regexp.MustCompile(`^(\+)?(\d+(?:\.\d+)?[KMGT]?)$`)

// memoryMiB reads "memory" ("4096" or "current=4096"; PVE's default is 512).
func memoryMiB(conf map[string]string) int64 {
	v := parsePropertyString(conf["memory"], "current")["current"]

	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 512
	}

	return n
}

func intOr(v string, def int64) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def
	}

	return n
}

// bootDiskSize is the size of the first bootable disk (PVE's maxdisk).
func bootDiskSize(conf map[string]string) int64 {
	order := parsePropertyString(conf["boot"], "legacy")["order"]
	for _, k := range strings.Split(order, ";") {
		if isDriveKey(k) && conf[k] != "" {
			return driveSize(conf[k])
		}
	}

	for _, k := range sortedDriveKeys(conf) {
		if !strings.Contains(conf[k], "media=cdrom") {
			return driveSize(conf[k])
		}
	}

	return 0
}

// vmStatus is PVE's vmstatus entry for a VM. Callers hold s.mu.
func (s *Server) vmStatus(v *vm) map[string]any {
	status := "stopped"
	uptime := int64(0)

	if v.running {
		status = "running"
		uptime = int64(time.Since(v.started).Seconds())
	}

	res := map[string]any{
		"vmid":      v.id,
		"name":      v.config["name"],
		"status":    status,
		"qmpstatus": status,
		"cpus":      intOr(v.config["cores"], 1) * intOr(v.config["sockets"], 1),
		"maxmem":    memoryMiB(v.config) << 20,
		"maxdisk":   bootDiskSize(v.config),
		"uptime":    uptime,
		"mem":       0,
		"disk":      0,
		"cpu":       0,
		"netin":     0,
		"netout":    0,
		"diskread":  0,
		"diskwrite": 0,
	}

	if v.running {
		res["pid"] = 100000 + v.id
		res["running-qemu"] = "9.2.0"
	}

	if t := v.config["tags"]; t != "" {
		res["tags"] = t
	}

	if l := v.config["lock"]; l != "" {
		res["lock"] = l
	}

	if v.config["template"] == "1" {
		res["template"] = 1
	}

	return res
}

// getVMStatus serves GET …/status/current.
func (s *Server) getVMStatus(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	v, e := s.lookupVM(c)
	if e != nil {
		return nil, e
	}

	res := s.vmStatus(v)
	res["ha"] = map[string]any{"managed": 0}

	if agentEnabled(v.config["agent"]) {
		res["agent"] = 1
	}

	return res, nil
}

// powerTask starts a power task on the call's VM; change runs under s.mu when the task ends.
func (s *Server) powerTask(c *call, typ string, change func(v *vm, r *taskRun) error) (any, *apiError) {
	s.mu.Lock()
	v, e := s.lookupVM(c)
	s.mu.Unlock()

	if e != nil {
		return nil, e
	}

	node, vmid := v.node, v.id

	return s.startTask(c, node, typ, strconv.Itoa(vmid), func(r *taskRun) error {
		s.mu.Lock()
		defer s.mu.Unlock()

		v := s.vms[vmid]
		if v == nil || v.creating || v.node != node {
			return fmt.Errorf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", node, vmid) //nolint:staticcheck // Proxmox VE's own wording
		}

		return change(v, r)
	}, nil), nil
}

// startVM serves POST …/status/start ("qmstart").
func (s *Server) startVM(c *call) (any, *apiError) {
	return s.powerTask(c, "qmstart", func(v *vm, r *taskRun) error {
		switch {
		case v.config["template"] == "1":
			return fmt.Errorf("you can't start a vm if it's a template")
		case v.running:
			return fmt.Errorf("VM %d already running", v.id)
		}

		if _, errs := s.nicsOf(v.config); len(errs) > 0 {
			return errors.New(firstError(errs))
		}

		r.logf("generating cloud-init ISO")
		v.running, v.started = true, time.Now()
		s.emit(EventStarted, v)

		return nil
	})
}

// stopVM serves POST …/status/stop ("qmstop"; stopping a stopped VM succeeds).
func (s *Server) stopVM(c *call) (any, *apiError) {
	return s.powerTask(c, "qmstop", func(v *vm, r *taskRun) error {
		if v.running {
			v.running = false
			r.await(s.emit(EventStopped, v))
		}

		return nil
	})
}

// shutdownVM serves POST …/status/shutdown ("qmshutdown").
func (s *Server) shutdownVM(c *call) (any, *apiError) {
	return s.powerTask(c, "qmshutdown", func(v *vm, r *taskRun) error {
		if v.running {
			v.running = false
			r.await(s.emit(EventStopped, v))
		}

		return nil
	})
}

// rebootVM serves POST …/status/reboot ("qmreboot"; the VM must run).
func (s *Server) rebootVM(c *call) (any, *apiError) {
	s.mu.Lock()
	v, e := s.lookupVM(c)
	if e == nil && !v.running {
		e = errf("VM %d not running", v.id)
	}
	s.mu.Unlock()

	if e != nil {
		return nil, e
	}

	return s.powerTask(c, "qmreboot", func(v *vm, _ *taskRun) error {
		if !v.running {
			return fmt.Errorf("VM %d not running", v.id)
		}

		v.started = time.Now()
		s.emit(EventRebooted, v)

		return nil
	})
}

// resizeVMDisk serves PUT …/resize: a "resize" task grows the disk (size absolute or +delta,
// bytes without unit).
func (s *Server) resizeVMDisk(c *call) (any, *apiError) {
	disk, okDisk := c.param("disk")
	size, okSize := c.param("size")

	switch {
	case !okDisk:
		return nil, paramErr1("disk", "property is missing and it is not optional")
	case !okSize:
		return nil, paramErr1("size", "property is missing and it is not optional")
	case !isDriveKey(disk):
		return nil, paramErr1("disk", "value '"+disk+"' does not have a value in the enumeration")
	case !resizeSizeRE.MatchString(size):
		return nil, paramErr1("size", "value does not match the regex pattern")
	}

	m := resizeSizeRE.FindStringSubmatch(size)
	amount, _ := parseSize(m[2])

	return s.powerTask(c, "resize", func(v *vm, r *taskRun) error {
		props := parsePropertyString(v.config[disk], "file")
		if props["file"] == "" {
			return fmt.Errorf("disk '%s' does not exist", disk)
		}

		if props["media"] == "cdrom" {
			return fmt.Errorf("you can't resize a cdrom")
		}

		id, name := splitVolid(props["file"], "")

		st := s.storageOn(v.node, id)
		if st == nil || st.volumes[name] == nil {
			return fmt.Errorf("volume '%s' does not exist", props["file"])
		}

		vol := st.volumes[name]

		newSize := amount
		if m[1] == "+" {
			newSize = vol.size + amount
		}

		switch {
		case newSize < vol.size:
			return fmt.Errorf("shrinking disks is not supported")
		case newSize == vol.size:
			return nil
		}

		vol.size, vol.file = newSize, newSize
		props["size"] = formatSize(newSize)
		file := props["file"]
		delete(props, "file")
		v.config[disk] = printPropertyString(file, props)
		r.logf("  Size of logical volume %s changed to %s.", name, formatSize(newSize))

		return nil
	})
}

// regenerateCloudInit serves PUT …/cloudinit (regenerates the drive; nothing to do here).
func (s *Server) regenerateCloudInit(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if _, e := s.lookupVM(c); e != nil {
		return nil, e
	}

	return nil, nil
}

// agentVM checks that the guest agent of the call's VM can answer. Callers hold s.mu.
func (s *Server) agentVM(c *call) (*vm, *apiError) {
	v, e := s.lookupVM(c)
	if e != nil {
		return nil, e
	}

	if !agentEnabled(v.config["agent"]) {
		return nil, errf("No QEMU guest agent configured")
	}

	if !v.running {
		return nil, errf("VM %d is not running", v.id)
	}

	if _, ok := s.reportedAddress(v); !ok {
		return nil, errf("QEMU guest agent is not running")
	}

	return v, nil
}

// agentNetworkInterfaces serves GET …/agent/network-get-interfaces: lo, then eth0, eth1, … for
// the VM's NICs in index order, each with its cloud-init ipconfigN addresses (ip and ip6); eth0
// carries the address supplied by the lab (SetGuestAddress) instead of ipconfig0's IPv4 one.
func (s *Server) agentNetworkInterfaces(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	v, e := s.agentVM(c)
	if e != nil {
		return nil, e
	}

	stats := map[string]int{"rx-bytes": 0, "rx-dropped": 0, "rx-errs": 0, "rx-packets": 0, "tx-bytes": 0, "tx-dropped": 0, "tx-errs": 0, "tx-packets": 0}
	result := []map[string]any{{
		"name":             "lo",
		"hardware-address": "00:00:00:00:00:00",
		"ip-addresses": []map[string]any{
			{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
			{"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128},
		},
		"statistics": stats,
	}}

	nics, _ := s.nicsOf(v.config)
	if len(nics) == 0 {
		nics = []NIC{{Key: "net0"}} // as before NICs were modelled: eth0 with ipconfig0's addresses
	}

	for i, n := range nics {
		addrs := []map[string]any{}
		for _, p := range s.guestAddresses(v, n.Index) {
			addrs = append(addrs, agentAddress(p))

			// Lab nodes live on loopback, which bpg never accepts as a guest's address: it waits
			// for a global unicast one until agent.timeout (15 minutes). A loopback address is
			// therefore followed by a stand-in from TEST-NET-2 (RFC 5737, documentation only,
			// never routed). Consumers that pick the first address of eth0 still get the
			// loopback one.
			if a := p.Addr(); a.Is4() && a.IsLoopback() {
				b := a.As4()
				addrs = append(addrs, agentAddress(netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, b[3]}), 24)))
			}
		}

		result = append(result, map[string]any{
			"name":             fmt.Sprintf("eth%d", i),
			"hardware-address": strings.ToLower(n.MAC),
			"ip-addresses":     addrs,
			"statistics":       stats,
		})
	}

	return map[string]any{"result": result}, nil
}

func agentAddress(p netip.Prefix) map[string]any {
	kind := "ipv4"
	if p.Addr().Is6() {
		kind = "ipv6"
	}

	return map[string]any{"ip-address": p.Addr().String(), "ip-address-type": kind, "prefix": p.Bits()}
}

// agentPing serves POST …/agent/ping.
func (s *Server) agentPing(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if _, e := s.agentVM(c); e != nil {
		return nil, e
	}

	return map[string]any{"result": map[string]any{}}, nil
}
