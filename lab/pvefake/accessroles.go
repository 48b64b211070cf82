package pvefake

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// listRoles serves GET /access/roles.
func (s *Server) listRoles(*call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := []map[string]any{}

	for _, id := range slices.Sorted(maps.Keys(s.access.roles)) {
		out = append(out, map[string]any{
			"roleid":  id,
			"privs":   strings.Join(slices.Sorted(maps.Keys(s.access.roles[id])), ","),
			"special": boolInt(s.access.special[id]),
		})
	}

	return out, nil
}

func (s *Server) parsePrivs(v string) (map[string]bool, *apiError) {
	out := map[string]bool{}

	for _, p := range splitList(v) {
		if !s.access.valid[p] {
			return nil, errf("invalid privilege '%s'", p)
		}

		out[p] = true
	}

	return out, nil
}

// createRole serves POST /access/roles.
func (s *Server) createRole(c *call) (any, *apiError) {
	id, _ := c.param("roleid")
	privs, _ := c.param("privs")

	s.mu.Lock()
	defer s.mu.Unlock()

	if s.access.roles[id] != nil {
		return nil, errf("create role failed: role '%s' already exists", id)
	}

	set, e := s.parsePrivs(privs)
	if e != nil {
		return nil, errf("create role failed: %s", e.Message)
	}

	s.access.roles[id] = set

	return nil, nil
}

// getRole serves GET /access/roles/{roleid}: privilege → 1.
func (s *Server) getRole(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	r := s.access.roles[c.vars["roleid"]]
	if r == nil {
		return nil, errf("role '%s' does not exist", c.vars["roleid"])
	}

	out := map[string]any{}
	for p := range r {
		out[p] = 1
	}

	return out, nil
}

// updateRole serves PUT /access/roles/{roleid} (append keeps the old privileges).
func (s *Server) updateRole(c *call) (any, *apiError) {
	id := c.vars["roleid"]

	appendPrivs, e := c.boolParam("append", false)
	if e != nil {
		return nil, e
	}

	privs, _ := c.param("privs")

	s.mu.Lock()
	defer s.mu.Unlock()

	if s.access.special[id] {
		return nil, errf("update role failed: cannot modify special role '%s'", id)
	}

	if s.access.roles[id] == nil {
		return nil, errf("update role failed: role '%s' does not exist", id)
	}

	set, e := s.parsePrivs(privs)
	if e != nil {
		return nil, errf("update role failed: %s", e.Message)
	}

	if appendPrivs {
		maps.Copy(set, s.access.roles[id])
	}

	s.access.roles[id] = set

	return nil, nil
}

// deleteRole serves DELETE /access/roles/{roleid}; ACL entries with the role go too.
func (s *Server) deleteRole(c *call) (any, *apiError) {
	id := c.vars["roleid"]

	s.mu.Lock()
	defer s.mu.Unlock()

	if s.access.special[id] {
		return nil, errf("delete role failed: cannot delete special role '%s'", id)
	}

	if s.access.roles[id] == nil {
		return nil, errf("delete role failed: role '%s' does not exist", id)
	}

	delete(s.access.roles, id)

	for _, e := range s.access.aclEntries() {
		if e.role == id {
			s.access.deleteACL(e.path, e.ugid, e.role)
		}
	}

	return nil, nil
}

// readACL serves GET /access/acl: all entries with Sys.Audit on /access, else those on paths
// the caller may modify.
func (s *Server) readACL(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	audit := s.can(c.user, "/access", false, "Sys.Audit")
	out := []map[string]any{}

	for _, e := range s.access.aclEntries() {
		if !audit && s.checkPermModify(c.user, e.path) != nil {
			continue
		}

		out = append(out, map[string]any{"path": e.path, "type": e.typ, "ugid": e.ugid, "roleid": e.role,
			"propagate": boolInt(e.propagate)})
	}

	return out, nil
}

// updateACL serves PUT /access/acl.
func (s *Server) updateACL(c *call) (any, *apiError) {
	users, _ := c.param("users")
	tokens, _ := c.param("tokens")
	groups, _ := c.param("groups")

	if users == "" && tokens == "" && groups == "" {
		msg := "either 'users', 'groups' or 'tokens' is required."
		return nil, paramErr(map[string]string{"users": msg, "groups": msg, "tokens": msg})
	}

	raw, _ := c.param("path")

	path, ok := normalizeACLPath(raw)
	if !ok {
		return nil, paramErr1("path", "invalid ACL path '"+raw+"'")
	}

	del, e := c.boolParam("delete", false)
	if e != nil {
		return nil, e
	}

	if !del && !checkACLPath(path) {
		return nil, paramErr1("path", "invalid ACL path '"+raw+"'")
	}

	propagate, e := c.boolParam("propagate", true)
	if e != nil {
		return nil, e
	}

	roles, _ := c.param("roles")

	s.mu.Lock()
	defer s.mu.Unlock()

	mine := s.privs(c.user, path)
	_, permMod := mine["Permissions.Modify"]
	verb := map[bool]string{true: "remove", false: "add"}[del]

	for _, role := range splitList(roles) {
		privs := s.access.roles[role]
		if privs == nil {
			return nil, errf("ACL update failed: role '%s' does not exist", role)
		}

		if !permMod {
			for _, p := range slices.Sorted(maps.Keys(privs)) {
				prop, ok := mine[p]
				if !ok {
					return nil, paramErr1("role", fmt.Sprintf("Cannot %s role '%s' - requires 'Permissions.Modify' or superset of privileges.", verb, role))
				}

				if propagate && !prop && !del {
					return nil, paramErr1("role", fmt.Sprintf("Cannot %s role '%s' with propagation - requires 'Permissions.Modify' or propagated superset of privileges.", verb, role))
				}
			}

			if role == "NoAccess" {
				return nil, paramErr1("role", fmt.Sprintf("Cannot %s role '%s' - requires 'Permissions.Modify'", verb, role))
			}
		}

		if g := splitList(groups); len(g) > 0 {
			return nil, errf("ACL update failed: group '%s' does not exist", g[0])
		}

		for _, id := range slices.Concat(splitList(users), splitList(tokens)) {
			isToken := strings.Contains(id, "!")
			if !s.access.subjectExists(id) {
				if isToken {
					user, name, _ := strings.Cut(id, "!")
					return nil, errf("ACL update failed: no such token '%s' for user '%s'", name, user)
				}

				return nil, errf("ACL update failed: user '%s' does not exist", id)
			}

			if del {
				s.access.deleteACL(path, id, role)
			} else {
				s.access.setACL(path, id, role, propagate)
			}
		}
	}

	return nil, nil
}

// getPermissions serves GET /access/permissions: path → privilege → propagate (1/0), for the
// caller, a token of the caller, or (with Sys.Audit on /access) anyone.
func (s *Server) getPermissions(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	who, ok := c.param("userid")
	if !ok {
		who = c.user
	}

	owner, _, _ := strings.Cut(who, "!")
	if who != c.user && owner != c.user {
		if e := s.check(c.user, "/access", "Sys.Audit"); e != nil {
			return nil, e
		}
	}

	toJSON := func(p map[string]bool) map[string]any {
		out := map[string]any{}
		for k, v := range p {
			out[k] = boolInt(v)
		}

		return out
	}

	if path, ok := c.param("path"); ok && path != "" {
		return map[string]any{path: toJSON(s.privs(who, path))}, nil
	}

	// get_effective_permissions: the top-level paths, every ACL path, every pool member
	paths := map[string]bool{"/": true, "/access": true, "/access/groups": true, "/nodes": true, "/pool": true,
		"/sdn": true, "/storage": true, "/vms": true}

	for _, p := range s.access.aclPaths() {
		paths[p] = true
	}

	for _, p := range s.pools {
		for _, id := range p.members {
			paths[fmt.Sprintf("/vms/%d", id)] = true
		}
	}

	out := map[string]any{}

	for p := range paths {
		if privs := s.privs(who, p); len(privs) > 0 {
			out[p] = toJSON(privs)
		}
	}

	return out, nil
}
