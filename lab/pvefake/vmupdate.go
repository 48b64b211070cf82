package pvefake

import (
	"errors"
	"fmt"
	"maps"
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
		var pe paramError
		if errors.As(err, &pe) {
			return nil, paramErr(pe)
		}

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

// applyUpdate applies deletions and new values to a VM's configuration. On a running VM, network
// devices are hot-plugged (hotplugNICs): one that cannot be is refused with PVE's parameter error,
// before anything changes, and a change of the guest's NICs is reported (EventNICsChanged).
// Callers hold s.mu.
func (s *Server) applyUpdate(v *vm, params map[string]string, r *taskRun) error {
	force := params["force"] == "1"
	conf := cloneConfig(v.config)
	deletes := tagSplitRE.Split(params["delete"], -1)

	for _, key := range deletes {
		if !isDriveKey(key) && !strings.HasPrefix(key, "unused") {
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

	next := cloneConfig(conf)
	for k, val := range set {
		if kd, _ := keyKind(k); kd == kNet {
			next[k] = val
		}
	}

	nicsChanged, errs := s.hotplugNICs(v, next)
	if len(errs) > 0 {
		return paramError(errs)
	}

	for _, key := range deletes {
		if key != "" && (isDriveKey(key) || strings.HasPrefix(key, "unused")) {
			s.detachDrive(v.id, v.node, conf, key, force)
		}
	}

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

	if nicsChanged {
		s.emit(EventNICsChanged, v)
	}

	return nil
}

// paramError is a parameter error raised while a configuration update is applied: PVE's 400
// "Parameter verification failed." with an error per option.
type paramError map[string]string

func (e paramError) Error() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(e)) {
		parts = append(parts, k+": "+e[k])
	}

	return "400 Parameter verification failed.\n" + strings.Join(parts, "\n")
}
