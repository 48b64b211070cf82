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
