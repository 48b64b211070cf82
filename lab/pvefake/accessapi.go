package pvefake

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The /access methods of pve-access-control (PVE/API2/User.pm, Role.pm, ACL.pm,
// AccessControl.pm's permissions), on the fake's accessState. Groups and realms other than pam
// and pve are not modelled.

func splitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' || r == '\n' })
}

func (s *Server) userEntryJSON(u *userEntry, full bool) map[string]any {
	e := map[string]any{"userid": u.id, "enable": boolInt(u.enable), "expire": u.expire}

	for k, v := range map[string]string{"comment": u.comment, "email": u.email, "firstname": u.first, "lastname": u.last} {
		if v != "" {
			e[k] = v
		}
	}

	_, realm, _ := strings.Cut(u.id, "@")
	if realm == "pam" || realm == "pve" {
		e["realm-type"] = realm
	}

	if full {
		tokens := []map[string]any{}
		for _, name := range slices.Sorted(maps.Keys(u.tokens)) {
			t := tokenJSON(u.tokens[name])
			t["tokenid"] = name
			tokens = append(tokens, t)
		}

		e["tokens"] = tokens
	}

	return e
}

func tokenJSON(t *tokenEntry) map[string]any {
	e := map[string]any{"privsep": boolInt(t.privsep), "expire": t.expire}
	if t.comment != "" {
		e["comment"] = t.comment
	}

	return e
}

// listUsers serves GET /access/users: everyone with User.Modify or Sys.Audit on /access/groups,
// else only the caller.
func (s *Server) listUsers(c *call) (any, *apiError) {
	full, e := c.boolParam("full", false)
	if e != nil {
		return nil, e
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	canMod := s.can(c.user, "/access/groups", true, "User.Modify", "Sys.Audit")
	enabled, filter := c.param("enabled")
	out := []map[string]any{}

	for _, id := range slices.Sorted(maps.Keys(s.access.users)) {
		u := s.access.users[id]
		if !canMod && id != c.user {
			continue
		}

		if filter && (enabled == "1") != u.enable {
			continue
		}

		out = append(out, s.userEntryJSON(u, full))
	}

	return out, nil
}

func (s *Server) setUserFields(c *call, u *userEntry) *apiError {
	if v, ok := c.param("enable"); ok {
		b, ok := parseBool(v)
		if !ok {
			return paramErr1("enable", "type check ('boolean') failed - got '"+v+"'")
		}

		u.enable = b
	}

	for name, into := range map[string]*string{"comment": &u.comment, "email": &u.email, "firstname": &u.first, "lastname": &u.last} {
		if v, ok := c.param(name); ok {
			*into = v
		}
	}

	if v, ok := c.param("expire"); ok {
		_, _ = fmt.Sscan(v, &u.expire)
	}

	if g, ok := c.param("groups"); ok && g != "" {
		return errf("no such group '%s'", splitList(g)[0])
	}

	return nil
}

// createUser serves POST /access/users.
func (s *Server) createUser(c *call) (any, *apiError) {
	id, _ := c.param("userid")
	if !userIDRE.MatchString(id) {
		return nil, paramErr1("userid", "value '"+id+"' does not look like a valid user name")
	}

	_, realm, _ := strings.Cut(id, "@")

	s.mu.Lock()
	defer s.mu.Unlock()

	if realm != "pam" && realm != "pve" {
		return nil, errf("create user failed: domain '%s' does not exist", realm)
	}

	if s.access.users[id] != nil {
		return nil, errf("create user failed: user '%s' already exists", id)
	}

	u := &userEntry{id: id, enable: true, tokens: map[string]*tokenEntry{}}
	if e := s.setUserFields(c, u); e != nil {
		return nil, e
	}

	if pw, ok := c.param("password"); ok && realm == "pve" {
		u.password = pw
	}

	s.access.users[id] = u

	return nil, nil
}

func (s *Server) lookupUser(c *call) (*userEntry, *apiError) {
	id := c.vars["userid"]

	u := s.access.users[id]
	if u == nil {
		return nil, errf("no such user ('%s')", id)
	}

	return u, nil
}

// getUser serves GET /access/users/{userid}.
func (s *Server) getUser(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	u, e := s.lookupUser(c)
	if e != nil {
		return nil, e
	}

	out := s.userEntryJSON(u, false)
	delete(out, "userid")
	delete(out, "realm-type")

	tokens := map[string]any{}
	for name, t := range u.tokens {
		tokens[name] = tokenJSON(t)
	}

	out["tokens"] = tokens

	return out, nil
}

// updateUser serves PUT /access/users/{userid}.
func (s *Server) updateUser(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	u, e := s.lookupUser(c)
	if e != nil {
		return nil, errf("update user failed: %s", e.Message)
	}

	return nil, s.setUserFields(c, u)
}

// removeSubjectACLs drops the ACL entries of a user or token (and the user's tokens').
func (a *accessState) removeSubjectACLs(id string) {
	for _, e := range a.aclEntries() {
		if e.ugid == id || strings.HasPrefix(e.ugid, id+"!") {
			a.deleteACL(e.path, e.ugid, e.role)
		}
	}
}

// deleteUser serves DELETE /access/users/{userid}.
func (s *Server) deleteUser(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	u, e := s.lookupUser(c)
	if e != nil {
		return nil, errf("delete user failed: %s", e.Message)
	}

	delete(s.access.users, u.id)
	s.access.removeSubjectACLs(u.id)

	return nil, nil
}

func (s *Server) lookupToken(c *call) (*userEntry, *tokenEntry, *apiError) {
	u, e := s.lookupUser(c)
	if e != nil {
		return nil, nil, e
	}

	name := c.vars["tokenid"]

	t := u.tokens[name]
	if t == nil {
		return u, nil, errf("no such token '%s' for user '%s'", name, u.id)
	}

	return u, t, nil
}

// createToken serves POST /access/users/{userid}/token/{tokenid}: answers the secret once, as
// {"full-tokenid", "info", "value"}. privsep defaults to 1.
func (s *Server) createToken(c *call) (any, *apiError) {
	name := c.vars["tokenid"]
	if !tokenSubRE.MatchString(name) {
		return nil, paramErr1("tokenid", "value does not match the regex pattern")
	}

	privsep, e := c.boolParam("privsep", true)
	if e != nil {
		return nil, e
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	u, e := s.lookupUser(c)
	if e != nil {
		return nil, e
	}

	if u.tokens[name] != nil {
		return nil, paramErr1("tokenid", "Token already exists.")
	}

	t := &tokenEntry{secret: s.generateUUID(), privsep: privsep}
	t.comment, _ = c.param("comment")

	if v, ok := c.param("expire"); ok {
		_, _ = fmt.Sscan(v, &t.expire)
	}

	u.tokens[name] = t

	info := map[string]any{"privsep": boolInt(privsep)}
	if t.comment != "" {
		info["comment"] = t.comment
	}

	if t.expire != 0 {
		info["expire"] = t.expire
	}

	return map[string]any{"full-tokenid": u.id + "!" + name, "info": info, "value": t.secret}, nil
}

// getToken serves GET /access/users/{userid}/token/{tokenid}.
func (s *Server) getToken(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	_, t, e := s.lookupToken(c)
	if e != nil {
		return nil, e
	}

	return tokenJSON(t), nil
}

// deleteToken serves DELETE /access/users/{userid}/token/{tokenid}; the token's ACLs go too.
func (s *Server) deleteToken(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	u, _, e := s.lookupToken(c)
	if e != nil {
		return nil, e
	}

	name := c.vars["tokenid"]
	delete(u.tokens, name)
	s.access.removeSubjectACLs(u.id + "!" + name)

	return nil, nil
}

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
