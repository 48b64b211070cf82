package pvefake

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// vm is a QEMU guest.
type vm struct {
	id       int
	node     string
	config   map[string]string
	creating bool // reserved by a running create task: invisible, but the id is taken
	running  bool
	started  time.Time
}

// flatten keeps the last value of every parameter.
func flatten(v url.Values) map[string]string {
	out := make(map[string]string, len(v))
	for k, vals := range v {
		if len(vals) > 0 {
			out[k] = vals[len(vals)-1]
		}
	}

	return out
}

// lookupVM finds the VM of the call's node and vmid. Callers hold s.mu.
func (s *Server) lookupVM(c *call) (*vm, *apiError) {
	node, e := c.node()
	if e != nil {
		return nil, e
	}

	id, e := c.vmid()
	if e != nil {
		return nil, e
	}

	v := s.vms[id]
	if v == nil || v.creating || v.node != node {
		return nil, notExist(node, id)
	}

	return v, nil
}

// checkPrivileges applies PVE's root-only options: host PCI passthrough by id, args and arch
// need the root@pam user itself (not an API token, not another user).
func checkPrivileges(user string, params map[string]string) *apiError {
	if isRootUser(user) {
		return nil
	}

	for _, k := range slices.Sorted(maps.Keys(params)) {
		switch {
		case strings.HasPrefix(k, "hostpci") && !strings.Contains(params[k], "mapping="):
			return errf("only root can set '%s' config for non-mapped devices", k)
		case k == "args" || k == "arch":
			return errf("only root can set '%s' config", k)
		}
	}

	return nil
}

// normalizeParams applies PVE's synchronous rewrites: cdrom alias, NIC MACs, sorted tags.
// Callers hold s.mu.
func (s *Server) normalizeParams(params, old map[string]string) {
	if v, ok := params["cdrom"]; ok {
		if !strings.Contains(v, "media=") {
			v += ",media=cdrom"
		}

		params["ide2"] = v
		delete(params, "cdrom")
	}

	for k, v := range params {
		switch kd, _ := keyKind(k); {
		case kd == kNet:
			mac := netMAC(old[k])
			if mac == "" {
				mac = s.generateMAC()
			}

			params[k], _ = normalizeNet(v, mac)
		case k == "tags":
			params[k] = normalizeTags(v)
		}
	}
}

// createVM serves POST /nodes/{node}/qemu: checks run at once, a "qmcreate" task allocates the
// disks (import-from, cloud-init) and writes the configuration.
func (s *Server) createVM(c *call) (any, *apiError) {
	params := flatten(c.params)
	delete(params, "node")

	rawID, ok := params["vmid"]
	if !ok {
		return nil, paramErr1("vmid", "property is missing and it is not optional")
	}

	vmid, err := strconv.Atoi(rawID)
	if err != nil || vmid < 100 || vmid > 999999999 {
		return nil, paramErr1("vmid", "invalid format - value does not look like a valid VM ID")
	}

	if e := checkConfigParams(params, createOnly); e != nil {
		return nil, e
	}

	start, e := c.boolParam("start", false)
	if e != nil {
		return nil, e
	}

	s.mu.Lock()
	node, e := c.node()
	if e == nil {
		e = s.checkCreate(c, node, vmid, params)
	}

	if e != nil {
		s.mu.Unlock()
		return nil, e
	}

	s.normalizeParams(params, nil)
	s.vms[vmid] = &vm{id: vmid, node: node, creating: true}
	s.mu.Unlock()

	undo := func() {
		if v := s.vms[vmid]; v != nil && v.creating {
			delete(s.vms, vmid)
		}
	}

	return s.startTask(c, node, "qmcreate", strconv.Itoa(vmid), func(r *taskRun) error {
		s.mu.Lock()
		defer s.mu.Unlock()

		conf := map[string]string{}
		for k, v := range params {
			if !slices.Contains(createOnly, k) && !isDriveKey(k) {
				conf[k] = v
			}
		}

		if _, err := s.applyDrives(node, vmid, params, params["storage"], conf, r); err != nil {
			undo()
			return fmt.Errorf("create failed - %w", err)
		}

		s.fillDefaults(conf)

		v := s.vms[vmid]
		v.config, v.creating = conf, false

		if p := params["pool"]; p != "" {
			s.pools[p].members = append(s.pools[p].members, vmid)
		}

		s.emit(EventCreated, v)

		if start {
			r.logf("start VM %d", vmid)

			// PVE's autostart after a create only warns when the start fails.
			if _, errs := s.nicsOf(v.config); len(errs) > 0 {
				r.logf("%s", firstError(errs))
			} else {
				v.running, v.started = true, time.Now()
				s.emit(EventStarted, v)
			}
		}

		return nil
	}, undo), nil
}

// checkCreate runs PVE's synchronous create checks. Callers hold s.mu.
func (s *Server) checkCreate(c *call, node string, vmid int, params map[string]string) *apiError {
	// pool existence, VM.Allocate, storages, config options, PCI mappings, bridges
	if e := s.checkCreatePerms(c.user, vmid, params); e != nil {
		return e
	}

	if e := checkPrivileges(c.user, params); e != nil {
		return e
	}

	if e := s.checkDriveStorages(node, params, params["storage"]); e != nil {
		return e
	}

	if old := s.vms[vmid]; old != nil {
		return errf("VM %d already exists on node '%s'", vmid, old.node)
	}

	return nil
}

// fillDefaults adds what PVE generates on create: smbios1 UUID, vmgenid, meta, boot order.
func (s *Server) fillDefaults(conf map[string]string) {
	if conf["smbios1"] == "" {
		conf["smbios1"] = "uuid=" + s.generateUUID()
	}

	if conf["vmgenid"] == "" || conf["vmgenid"] == "1" {
		conf["vmgenid"] = s.generateUUID()
	}

	conf["meta"] = fmt.Sprintf("creation-qemu=9.2.0,ctime=%d", time.Now().Unix())

	if conf["boot"] == "" {
		var order []string

		for _, k := range sortedDriveKeys(conf) {
			props := parsePropertyString(conf[k], "file")
			if !strings.HasPrefix(k, "efidisk") && !strings.HasPrefix(k, "tpmstate") && !strings.Contains(props["file"], "cloudinit") {
				order = append(order, k)
			}
		}

		if _, ok := conf["net0"]; ok {
			order = append(order, "net0")
		}

		if len(order) > 0 {
			conf["boot"] = "order=" + strings.Join(order, ";")
		}
	}
}

// deleteVM serves DELETE /nodes/{node}/qemu/{vmid}: a "qmdestroy" task frees the disks.
func (s *Server) deleteVM(c *call) (any, *apiError) {
	purge, e := c.boolParam("purge", false)
	if e != nil {
		return nil, e
	}

	unreferenced, e := c.boolParam("destroy-unreferenced-disks", false)
	if e != nil {
		return nil, e
	}

	s.mu.Lock()
	v, e := s.lookupVM(c)

	switch {
	case e != nil:
	case v.running:
		e = errf("VM %d is running - destroy failed", v.id)
	case v.config["protection"] == "1":
		e = errf("can't remove VM %d - protection mode enabled", v.id)
	}
	s.mu.Unlock()

	if e != nil {
		return nil, e
	}

	node, vmid := v.node, v.id

	return s.startTask(c, node, "qmdestroy", strconv.Itoa(vmid), func(r *taskRun) error {
		s.mu.Lock()
		defer s.mu.Unlock()

		v := s.vms[vmid]
		if v == nil || v.creating {
			return fmt.Errorf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", node, vmid) //nolint:staticcheck // Proxmox VE's own wording
		}

		if v.running {
			return fmt.Errorf("VM %d is running - destroy failed", vmid)
		}

		for _, volid := range configVolumes(v.config) {
			id, name := splitVolid(volid, "")
			if st := s.storageOn(node, id); st != nil && st.volumes[name] != nil && st.volumes[name].vmid == vmid {
				delete(st.volumes, name)
				r.logf("Removed volume '%s'", volid)
			}
		}

		if unreferenced {
			for _, st := range s.storagesOn(node) {
				for name, vol := range st.volumes {
					if vol.vmid == vmid && vol.content == "images" {
						delete(st.volumes, name)
						r.logf("Removed unreferenced volume '%s'", st.volid(vol))
					}
				}
			}
		}

		if purge {
			for _, p := range s.pools {
				p.members = slices.DeleteFunc(p.members, func(id int) bool { return id == vmid })
			}

			r.logf("purging VM %d from related configurations..", vmid)
		}

		delete(s.vms, vmid)
		delete(s.guestAddr, vmid)
		r.await(s.emit(EventDeleted, v))

		return nil
	}, nil), nil
}

// listVMs serves GET /nodes/{node}/qemu.
func (s *Server) listVMs(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	node, e := c.node()
	if e != nil {
		return nil, e
	}

	out := []map[string]any{}

	for _, v := range s.sortedVMs() {
		// vmlist: only VMs with VM.Audit
		if v.node == node && s.can(c.user, fmt.Sprintf("/vms/%d", v.id), false, "VM.Audit") {
			out = append(out, s.vmStatus(v))
		}
	}

	return out, nil
}

func (s *Server) sortedVMs() []*vm {
	out := make([]*vm, 0, len(s.vms))
	for _, v := range s.vms {
		if !v.creating {
			out = append(out, v)
		}
	}

	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })

	return out
}

// getVMConfig serves GET /nodes/{node}/qemu/{vmid}/config.
func (s *Server) getVMConfig(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	v, e := s.lookupVM(c)
	if e != nil {
		return nil, e
	}

	return configJSON(v.config), nil
}
