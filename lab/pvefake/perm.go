package pvefake

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

// Permission checks as PVE runs them: first the method's "permissions" object from PVE's API
// schema (PVE::RPCEnvironment::check_api2_permissions, called by pve-manager's
// PVE::HTTPServer::rest_handler before the handler runs), then the checks inside the handlers
// (qemu-server's PVE/API2/Qemu.pm, pve-storage's Content.pm, pve-manager's Cluster.pm and
// Tasks.pm) for the methods the fake serves.

// permErr is PVE::Exception::raise_perm_exc: 403 "Permission check failed (<what>)".
func permErr(what string) *apiError {
	msg := "Permission check failed"
	if what != "" {
		msg += " (" + what + ")"
	}

	return &apiError{Code: http.StatusForbidden, Message: msg}
}

// permSchema picks the schema whose "permissions" the fake enforces: Options.Schema, else the
// vendored schema of the fake's major version.
func permSchema(o Options) (*pveschema.Schema, error) {
	if o.Schema != nil {
		return o.Schema, nil
	}

	v := "9"
	if strings.HasPrefix(o.Version, "8.") || strings.HasPrefix(o.Version, "7.") {
		v = "8.4"
	}

	return pveschema.Load(v)
}

var vmPathRE = regexp.MustCompile(`^/vms/(\d+)$`)

// privs returns the privileges of user on path. Callers hold s.mu.
func (s *Server) privs(user, path string) map[string]bool {
	return s.access.permissions(user, path, func(p string) string {
		if m := vmPathRE.FindStringSubmatch(p); m != nil {
			id, _ := strconv.Atoi(m[1])
			return s.poolOf(id)
		}

		return ""
	})
}

// can is $rpcenv->check (any=false) or check_any (any=true) with noerr. Callers hold s.mu.
func (s *Server) can(user, path string, any bool, privs ...string) bool {
	have := s.privs(user, path)

	for _, p := range privs {
		_, ok := have[p]
		if any && ok {
			return true
		}

		if !any && !ok {
			return false
		}
	}

	return !any
}

// check is $rpcenv->check: every privilege, else 403 naming the first one missing.
// Callers hold s.mu.
func (s *Server) check(user, path string, privs ...string) *apiError {
	have := s.privs(user, path)

	for _, p := range privs {
		if _, ok := have[p]; !ok {
			return permErr(path + ", " + p)
		}
	}

	return nil
}

// checkAny is $rpcenv->check_any: one of privs, else 403 naming them all. Callers hold s.mu.
func (s *Server) checkAny(user, path string, privs ...string) *apiError {
	if s.can(user, path, true, privs...) {
		return nil
	}

	return permErr(path + ", " + strings.Join(privs, "|"))
}

// checkVMPerm is $rpcenv->check_vm_perm: the pool's ACL first (if pool is set), then the VM's.
func (s *Server) checkVMPerm(user string, vmid int, pool string, any bool, privs ...string) *apiError {
	if pool != "" && s.can(user, "/pool/"+pool, any, privs...) {
		return nil
	}

	path := fmt.Sprintf("/vms/%d", vmid)
	if any {
		return s.checkAny(user, path, privs...)
	}

	return s.check(user, path, privs...)
}

// templateReplace is PVE::Tools::template_replace: "{name}" becomes the parameter, "-" if unset.
func templateReplace(tmpl string, params map[string]string) string {
	return tmplVarRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		if v := params[strings.Trim(m, "{}")]; v != "" && v != "0" {
			return v
		}

		return "-"
	})
}

var tmplVarRE = regexp.MustCompile(`\{[^}]+\}`)

// checkAPIPermissions is PVE::RPCEnvironment::check_api2_permissions for the request. Callers
// hold s.mu.
func (s *Server) checkAPIPermissions(c *call, method, escaped, display string) *apiError {
	perms, allowToken, _, _, ok := s.permSchema.Permissions(method, escaped)
	if !ok {
		return nil
	}

	user := c.user

	if strings.Contains(user, "!") && !allowToken {
		return permErr("URI '" + display + "' not available with API token, need proper ticket.\n")
	}

	if u, _ := perms["user"].(string); u == "world" {
		return nil
	}

	if user == "root@pam" {
		return nil
	}

	if perms == nil {
		return permErr("user != root@pam")
	}

	if u, _ := perms["user"].(string); u == "all" {
		return nil
	}

	chk, ok := perms["check"].([]any)
	if !ok {
		return permErr("")
	}

	params := flatten(c.params)
	maps.Copy(params, c.vars)

	_, e := s.execCheck(user, chk, params, false)

	return e
}

func strList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))

	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}

	return out
}

// options reads the trailing "key", value pairs of a check.
func options(chk []any, from int) map[string]any {
	out := map[string]any{}

	for i := from; i+1 < len(chk); i += 2 {
		if k, ok := chk[i].(string); ok {
			out[k] = chk[i+1]
		}
	}

	return out
}

func truthy(v any) bool {
	switch x := v.(type) {
	case float64:
		return x != 0
	case string:
		return x != "" && x != "0"
	case bool:
		return x
	}

	return false
}

// execCheck is exec_api2_perm_check. With noerr a failed check answers false, nil.
func (s *Server) execCheck(user string, chk []any, params map[string]string, noerr bool) (bool, *apiError) {
	fail := func(e *apiError) (bool, *apiError) {
		if noerr {
			return false, nil
		}

		return false, e
	}

	test, _ := chk[0].(string)

	switch test {
	case "and":
		for _, sub := range chk[1:] {
			subl, _ := sub.([]any)
			if _, e := s.execCheck(user, subl, params, false); e != nil {
				return fail(e)
			}
		}

		return true, nil
	case "or":
		for _, sub := range chk[1:] {
			subl, _ := sub.([]any)
			if ok, _ := s.execCheck(user, subl, params, true); ok {
				return true, nil
			}
		}

		return fail(permErr(""))
	case "perm":
		if len(chk) < 3 {
			return fail(errf("missing parameters"))
		}

		tmpl, _ := chk[1].(string)
		privs := strList(chk[2])
		opts := options(chk, 3)

		if rp, ok := opts["require_param"].(string); ok && params[rp] == "" {
			return fail(permErr(""))
		}

		path, _ := normalizeACLPath(templateReplace(tmpl, params))

		var e *apiError
		if truthy(opts["any"]) {
			e = s.checkAny(user, path, privs...)
		} else {
			e = s.check(user, path, privs...)
		}

		if e != nil {
			return fail(e)
		}

		return true, nil
	case "userid-group":
		privs := strList(chk[1])
		opts := options(chk, 2)
		userid := params["userid"]
		gp, _ := opts["groups_param"].(string)

		if gp != "create" && s.access.users[userid] == nil {
			return fail(errf("no such user ('%s')", userid))
		}

		if s.can(user, "/access/groups", true, privs...) {
			return true, nil
		}

		// groups are not modelled: no group grants anything
		if gp != "" {
			return fail(permErr("/access/groups, " + strings.Join(privs, "|")))
		}

		return fail(permErr(""))
	case "userid-param":
		userid := params["userid"]
		sub, _ := chk[1].(string)

		switch sub {
		case "self":
			if s.access.users[userid] == nil {
				return fail(errf("no such user ('%s')", userid))
			}

			if user == userid {
				return true, nil
			}

			return fail(permErr(""))
		case "Realm.AllocateUser":
			_, realm, _ := strings.Cut(userid, "@")
			if e := s.check(user, "/access/realm/"+realm, "Realm.AllocateUser"); e != nil {
				return fail(e)
			}

			return true, nil
		}

		return fail(errf("unknown userid-param test"))
	case "perm-modify":
		tmpl, _ := chk[1].(string)

		path, ok := normalizeACLPath(templateReplace(tmpl, params))
		if !ok {
			return false, nil
		}

		if e := s.checkPermModify(user, path); e != nil {
			return fail(e)
		}

		return true, nil
	}

	return fail(errf("unknown permission test"))
}

// checkPermModify is check_perm_modify.
func (s *Server) checkPermModify(user, path string) *apiError {
	privs := []string{"Permissions.Modify"}

	switch {
	case strings.HasPrefix(path, "/storage/"):
		privs = append(privs, "Datastore.Allocate")
	case strings.HasPrefix(path, "/vms/"):
		privs = append(privs, "VM.Allocate")
	case strings.HasPrefix(path, "/pool/"):
		privs = append(privs, "Pool.Allocate")
	}

	return s.checkAny(user, path, privs...)
}

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
