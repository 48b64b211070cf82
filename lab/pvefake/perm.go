package pvefake

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
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
