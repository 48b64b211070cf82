package pvefake

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The checks inside qemu-server's handlers (PVE/API2/Qemu.pm) for VM create and config updates,
// and who may read a task.

// Option groups of qemu-server's PVE/API2/Qemu.pm ($cpuoptions, $memoryoptions, …).
var (
	cpuOptions      = toSet("cores", "cpu", "runningcpu", "cpulimit", "cpuunits", "numa", "smp", "sockets", "vcpus")
	memoryOptions   = toSet("memory", "balloon", "shares", "allow-ksm")
	hwtypeOptions   = toSet("acpi", "hotplug", "kvm", "machine", "runningmachine", "scsihw", "smbios1", "tablet", "vga", "watchdog", "audio0", "rng0")
	generalOptions  = toSet("agent", "autostart", "bios", "description", "keyboard", "localtime", "migrate_downtime", "migrate_speed", "name", "onboot", "ostype", "protection", "reboot", "startdate", "startup", "tdf", "template")
	vmpowerOptions  = toSet("freeze")
	diskOptions     = toSet("boot", "bootdisk", "vmstatestorage")
	cloudinitOption = toSet("cicustom", "cipassword", "citype", "ciuser", "ciupgrade", "nameserver", "searchdomain", "sshkeys")
	skipModifyRE    = regexp.MustCompile(`^(?:unused|serial|usb|hostpci|virtiofs)\d+$`)
	numaNRE         = regexp.MustCompile(`^numa\d+$`)
	netNRE          = regexp.MustCompile(`^net\d+$`)
	ipconfigRE      = regexp.MustCompile(`^ipconfig\d+$`)
)

// checkModifyConfigPerm is $check_vm_modify_config_perm.
func (s *Server) checkModifyConfigPerm(user string, vmid int, pool string, keys []string) *apiError {
	if user == "root@pam" {
		return nil
	}

	for _, opt := range slices.Sorted(slices.Values(keys)) {
		if isDriveKey(opt) || opt == "cdrom" || skipModifyRE.MatchString(opt) || opt == "tags" {
			continue
		}

		var e *apiError

		switch {
		case cpuOptions[opt] || numaNRE.MatchString(opt):
			e = s.checkVMPerm(user, vmid, pool, false, "VM.Config.CPU")
		case memoryOptions[opt]:
			e = s.checkVMPerm(user, vmid, pool, false, "VM.Config.Memory")
		case hwtypeOptions[opt]:
			e = s.checkVMPerm(user, vmid, pool, false, "VM.Config.HWType")
		case generalOptions[opt]:
			e = s.checkVMPerm(user, vmid, pool, false, "VM.Config.Options")
			if e == nil && opt == "startup" {
				e = s.check(user, "/", "Sys.Modify")
			}
		case vmpowerOptions[opt]:
			e = s.checkVMPerm(user, vmid, pool, false, "VM.PowerMgmt")
		case diskOptions[opt]:
			e = s.checkVMPerm(user, vmid, pool, false, "VM.Config.Disk")
		case netNRE.MatchString(opt) || opt == "running-nets-host-mtu":
			e = s.checkVMPerm(user, vmid, pool, false, "VM.Config.Network")
		case cloudinitOption[opt] || ipconfigRE.MatchString(opt):
			e = s.checkVMPerm(user, vmid, pool, true, "VM.Config.Cloudinit", "VM.Config.Network")
		case opt == "vmstate":
			e = s.checkVMPerm(user, vmid, pool, false, "VM.Config.Disk", "VM.PowerMgmt")
		default:
			e = errf("only root can set '%s' config", opt)
		}

		if e != nil {
			return e
		}
	}

	return nil
}

var (
	volOwnerRE = regexp.MustCompile(`(?:^|/)(?:vm|base)-(\d+)-`)
	dirOwnerRE = regexp.MustCompile(`^(\d+)/`)
	backupRE   = regexp.MustCompile(`vzdump-(?:qemu|lxc)-(\d+)-`)
)

// volumeType is PVE::Storage::parse_volname's type and owner for a volume name.
func volumeType(name string) (string, int) {
	for _, t := range []string{"iso", "import", "vztmpl", "snippets"} {
		if strings.HasPrefix(name, t+"/") {
			return t, 0
		}
	}

	if strings.HasPrefix(name, "backup/") || strings.HasPrefix(name, "dump/") {
		if m := backupRE.FindStringSubmatch(name); m != nil {
			id, _ := strconv.Atoi(m[1])
			return "backup", id
		}

		return "backup", 0
	}

	// a file based storage's images live in <vmid>/: the directory names the owner
	if m := dirOwnerRE.FindStringSubmatch(name); m != nil {
		id, _ := strconv.Atoi(m[1])
		return "images", id
	}

	if m := volOwnerRE.FindStringSubmatch(name); m != nil {
		id, _ := strconv.Atoi(m[1])
		return "images", id
	}

	return "images", 0
}

// checkVolumeAccess is PVE::Storage::check_volume_access (vmid 0: none).
func (s *Server) checkVolumeAccess(user string, vmid int, volid string) *apiError {
	sid, name, ok := strings.Cut(volid, ":")
	if !ok || strings.HasPrefix(volid, "/") {
		if user != "root@pam" {
			return errf("Only root can pass arbitrary filesystem paths.")
		}

		return nil
	}

	if s.can(user, "/storage/"+sid, false, "Datastore.Allocate") {
		return nil
	}

	vtype, owner := volumeType(name)

	switch {
	case vtype == "iso" || vtype == "vztmpl" || vtype == "import":
		return s.checkAny(user, "/storage/"+sid, "Datastore.AllocateSpace", "Datastore.Audit")
	case owner != 0 && vmid != 0 && owner == vmid:
		return nil
	case vtype == "backup" && owner != 0:
		if e := s.check(user, "/storage/"+sid, "Datastore.AllocateSpace"); e != nil {
			return e
		}

		return s.check(user, fmt.Sprintf("/vms/%d", owner), "VM.Backup")
	case vtype == "images" && owner != 0:
		if e := s.check(user, "/storage/"+sid, "Datastore.Audit"); e != nil {
			return e
		}

		return s.check(user, fmt.Sprintf("/vms/%d", owner), "VM.Config.Disk")
	}

	return errf("missing privileges to access %s", volid)
}

// checkStorageAccess is $check_storage_access over the drives of params.
func (s *Server) checkStorageAccess(user string, vmid int, params map[string]string, defaultStorage string) *apiError {
	for _, key := range sortedDriveKeys(params) {
		props := parsePropertyString(params[key], "file")
		file := props["file"]
		cdrom := props["media"] == "cdrom" || key == "cdrom"

		sid, vname, hasSid := strings.Cut(file, ":")
		if !hasSid {
			vname = file
		}

		switch {
		case file == "" || file == "none" || file == "cloudinit" || vname == "cloudinit":
		case cdrom && file == "cdrom":
			if e := s.check(user, "/", "Sys.Console"); e != nil {
				return e
			}
		case !cdrom && newDiskRE.MatchString(file):
			id := newDiskRE.FindStringSubmatch(file)[2]
			if id == "" {
				id = defaultStorage
			}

			if id == "" {
				return errf("no storage ID specified (and no default storage)")
			}

			if e := s.check(user, "/storage/"+id, "Datastore.AllocateSpace"); e != nil {
				return e
			}
		default:
			if e := s.checkVolumeAccess(user, vmid, file); e != nil {
				return e
			}

			_ = sid
		}

		if src := props["import-from"]; src != "" {
			srcSid, srcName, ok := strings.Cut(src, ":")
			_, owner := volumeType(srcName)

			switch {
			case ok && srcSid != "" && owner != 0:
				if e := s.check(user, fmt.Sprintf("/vms/%d", owner), "VM.Clone"); e != nil {
					return e
				}
			default:
				if e := s.checkVolumeAccess(user, vmid, src); e != nil {
					return e
				}
			}
		}
	}

	if st := params["vmstatestorage"]; st != "" {
		return s.check(user, "/storage/"+st, "Datastore.AllocateSpace")
	}

	return nil
}

// checkHostPCIPerm is check_hostpci_perm.
func (s *Server) checkHostPCIPerm(user string, vmid int, pool, opt, value string) *apiError {
	if user == "root@pam" {
		return nil
	}

	d := parsePropertyString(value, "host")

	switch {
	case d["host"] != "":
		return errf("only root can set '%s' config for non-mapped devices", opt)
	case d["mapping"] != "":
		if e := s.check(user, "/mapping/pci/"+d["mapping"], "Mapping.Use"); e != nil {
			return e
		}

		if e := s.checkVMPerm(user, vmid, pool, false, "VM.Config.HWType"); e != nil {
			return e
		}
	default:
		return errf("either 'host' or 'mapping' must be set.")
	}

	if _, ok := d["romfile"]; ok {
		return paramErr1(opt, "only root@pam can set 'romfile' option")
	}

	return nil
}

// checkBridgeAccess is PVE::QemuServer::check_bridge_access with pve-guest-common's
// check_vnet_access (zone "localnetwork": the fake has no SDN VNets).
func (s *Server) checkBridgeAccess(user string, params map[string]string) *apiError {
	if user == "root@pam" {
		return nil
	}

	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !netNRE.MatchString(k) {
			continue
		}

		n := parsePropertyString(params[k], "model")

		bridge := n["bridge"]
		if bridge == "" {
			continue
		}

		base := "/sdn/zones/localnetwork/" + bridge
		tag, trunks := n["tag"], n["trunks"]

		if tag != "" {
			if e := s.check(user, base+"/"+tag, "SDN.Use"); e != nil {
				return e
			}
		}

		for _, t := range strings.Split(trunks, ";") {
			if t == "" {
				continue
			}

			lo, hi, isRange := strings.Cut(t, "-")
			a, _ := strconv.Atoi(lo)
			b := a

			if isRange {
				b, _ = strconv.Atoi(hi)
			}

			for v := a; v <= b && v-a < 4096; v++ {
				if e := s.check(user, base+"/"+strconv.Itoa(v), "SDN.Use"); e != nil {
					return e
				}
			}
		}

		if tag == "" && trunks == "" {
			if e := s.check(user, base, "SDN.Use"); e != nil {
				return e
			}
		}
	}

	return nil
}

// createParamsOnly are the parameters create_vm extracts before its configuration checks.
var createParamsOnly = toSet("node", "vmid", "archive", "bwlimit", "force", "pool", "start", "ha-managed",
	"storage", "unique", "live-restore", "import-working-storage")

// checkCreatePerms is create_vm's permission checks, in its order. Callers hold s.mu.
func (s *Server) checkCreatePerms(user string, vmid int, params map[string]string) *apiError {
	pool := params["pool"]
	if pool != "" && s.pools[pool] == nil {
		return permErr("pool '" + pool + "' does not exist")
	}

	if user == "root@pam" {
		return nil
	}

	if st := params["storage"]; st != "" {
		if e := s.check(user, "/storage/"+st, "Datastore.AllocateSpace"); e != nil {
			return e
		}
	}

	if s.access.pve9 && truthy(params["start"]) {
		if e := s.checkVMPerm(user, vmid, pool, false, "VM.PowerMgmt"); e != nil {
			return e
		}
	}

	if !s.can(user, fmt.Sprintf("/vms/%d", vmid), false, "VM.Allocate") &&
		(pool == "" || !s.can(user, "/pool/"+pool, false, "VM.Allocate")) {
		return permErr("")
	}

	conf := map[string]string{}

	for k, v := range params {
		if !createParamsOnly[k] {
			conf[k] = v
		}
	}

	if len(conf) == 0 {
		return nil
	}

	if v, ok := conf["cdrom"]; ok {
		conf["ide2"] = v + ",media=cdrom"
		delete(conf, "cdrom")
	}

	if e := s.checkStorageAccess(user, vmid, conf, params["storage"]); e != nil {
		return e
	}

	if e := s.checkModifyConfigPerm(user, vmid, pool, slices.Collect(maps.Keys(conf))); e != nil {
		return e
	}

	for _, k := range slices.Sorted(maps.Keys(conf)) {
		switch {
		case strings.HasPrefix(k, "serial"):
			if conf[k] != "socket" {
				return errf("only root can set '%s' config for real devices", k)
			}

			if e := s.checkVMPerm(user, vmid, pool, false, "VM.Config.HWType"); e != nil {
				return e
			}
		case strings.HasPrefix(k, "hostpci"):
			if e := s.checkHostPCIPerm(user, vmid, pool, k, conf[k]); e != nil {
				return e
			}
		}
	}

	return s.checkBridgeAccess(user, conf)
}

// updateParamsOnly are the parameters update_vm_api extracts.
var updateParamsOnly = toSet("node", "vmid", "digest", "background_delay", "skiplock", "delete", "revert", "force",
	"import-working-storage")

// checkUpdatePerms is update_vm_api's permission checks. Callers hold s.mu.
func (s *Server) checkUpdatePerms(user string, v *vm, params map[string]string) *apiError {
	if user == "root@pam" {
		return nil
	}

	var deletes []string

	deletes = append(deletes, strings.FieldsFunc(params["delete"], func(r rune) bool { return r == ',' || r == ';' || r == ' ' })...)

	conf := map[string]string{}

	for k, val := range params {
		if !updateParamsOnly[k] {
			conf[k] = val
		}
	}

	if e := s.checkModifyConfigPerm(user, v.id, "", deletes); e != nil {
		return e
	}

	if e := s.checkModifyConfigPerm(user, v.id, "", slices.Collect(maps.Keys(conf))); e != nil {
		return e
	}

	if e := s.checkStorageAccess(user, v.id, conf, ""); e != nil {
		return e
	}

	if e := s.checkBridgeAccess(user, conf); e != nil {
		return e
	}

	drivePerms := func(opt, val string) *apiError {
		props := parsePropertyString(val, "file")

		switch {
		case cloudinitRE.MatchString(props["file"]):
			return s.checkVMPerm(user, v.id, "", false, "VM.Config.Cloudinit", "VM.Config.CDROM")
		case props["media"] == "cdrom":
			return s.checkVMPerm(user, v.id, "", false, "VM.Config.CDROM")
		}

		return s.checkVMPerm(user, v.id, "", false, "VM.Config.Disk")
	}

	for _, opt := range deletes {
		old, ok := v.config[opt]
		if !ok {
			continue
		}

		var e *apiError

		switch {
		case strings.HasPrefix(opt, "unused"):
			e = s.checkVMPerm(user, v.id, "", false, "VM.Config.Disk")
		case isDriveKey(opt):
			e = drivePerms(opt, old)
		case strings.HasPrefix(opt, "hostpci"):
			e = s.checkHostPCIPerm(user, v.id, "", opt, old)
		case netNRE.MatchString(opt):
			e = s.checkBridgeAccess(user, map[string]string{opt: old})
		}

		if e != nil {
			return e
		}
	}

	for _, opt := range slices.Sorted(maps.Keys(conf)) {
		var e *apiError

		switch {
		case isDriveKey(opt):
			e = drivePerms(opt, conf[opt])
		case strings.HasPrefix(opt, "hostpci"):
			if old := v.config[opt]; old != "" {
				e = s.checkHostPCIPerm(user, v.id, "", opt, old)
			}

			if e == nil {
				e = s.checkHostPCIPerm(user, v.id, "", opt, conf[opt])
			}
		case netNRE.MatchString(opt):
			if old := v.config[opt]; old != "" {
				e = s.checkBridgeAccess(user, map[string]string{opt: old})
			}
		}

		if e != nil {
			return e
		}
	}

	return nil
}

// ownsTask is Tasks.pm's $check_task_user: a token sees its own tasks, a user its own and its
// tokens'.
func ownsTask(t *task, user string) bool {
	taskUser, _, _ := strings.Cut(t.user, "!")
	return user == t.user || user == taskUser
}
