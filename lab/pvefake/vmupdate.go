package pvefake

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// updateVMConfigSync serves PUT …/config (applied at once, answers null).
func (s *Server) updateVMConfigSync(c *call) (any, *apiError) {
	params, e := s.checkUpdate(c)
	if e != nil {
		return nil, e
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	v, e := s.lookupVM(c)
	if e == nil {
		e = s.checkUpdatePerms(c.user, v, params)
	}

	if e != nil {
		return nil, e
	}

	if err := s.applyUpdate(v, params, nil); err != nil {
		return nil, errf("%s", err.Error())
	}

	return nil, nil
}

// updateVMConfigAsync serves POST …/config: a "qmconfig" task applies the change.
func (s *Server) updateVMConfigAsync(c *call) (any, *apiError) {
	params, e := s.checkUpdate(c)
	if e != nil {
		return nil, e
	}

	s.mu.Lock()
	v, e := s.lookupVM(c)
	if e == nil {
		e = s.checkUpdatePerms(c.user, v, params)
	}
	s.mu.Unlock()

	if e != nil {
		return nil, e
	}

	node, vmid := v.node, v.id

	return s.startTask(c, node, "qmconfig", strconv.Itoa(vmid), func(r *taskRun) error {
		s.mu.Lock()
		defer s.mu.Unlock()

		v := s.vms[vmid]
		if v == nil || v.creating {
			return fmt.Errorf("Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", node, vmid) //nolint:staticcheck // Proxmox VE's own wording
		}

		return s.applyUpdate(v, params, r)
	}, nil), nil
}

func (s *Server) checkUpdate(c *call) (map[string]string, *apiError) {
	params := flatten(c.params)
	delete(params, "node")
	delete(params, "vmid")

	if e := checkConfigParams(params, updateOnly); e != nil {
		return nil, e
	}

	if e := checkPrivileges(c.user, params); e != nil {
		return nil, e
	}

	return params, nil
}

// applyUpdate applies deletions and new values to a VM's configuration. Callers hold s.mu.
func (s *Server) applyUpdate(v *vm, params map[string]string, r *taskRun) error {
	force := params["force"] == "1"
	conf := cloneConfig(v.config)

	for _, key := range tagSplitRE.Split(params["delete"], -1) {
		if key == "" {
			continue
		}

		if isDriveKey(key) || strings.HasPrefix(key, "unused") {
			s.detachDrive(v.id, v.node, conf, key, force)
		} else {
			delete(conf, key)
		}
	}

	set := map[string]string{}
	for k, val := range params {
		if !slices.Contains(updateOnly, k) {
			set[k] = val
		}
	}

	s.normalizeParams(set, conf)

	if e := s.checkDriveStorages(v.node, set, ""); e != nil {
		return fmt.Errorf("%s", e.Message)
	}

	if _, err := s.applyDrives(v.node, v.id, set, "", conf, r); err != nil {
		return err
	}

	for k, val := range set {
		if !isDriveKey(k) {
			conf[k] = val
		}
	}

	v.config = conf

	return nil
}
