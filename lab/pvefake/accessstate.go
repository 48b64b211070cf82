package pvefake

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// The access state: users, tokens and the ACL tree, and how PVE computes effective privileges
// from them (PVE::AccessControl roles and permissions).

type userEntry struct {
	id, password, comment string
	enable                bool
	expire                int64
	email, first, last    string
	tokens                map[string]*tokenEntry
}

type tokenEntry struct {
	secret, comment string
	privsep         bool
	expire          int64
}

// aclNode is a node of PVE's ACL tree: per user or token id, role → propagate.
type aclNode struct {
	children map[string]*aclNode
	users    map[string]map[string]bool
	tokens   map[string]map[string]bool
}

// accessState is user.cfg. Guarded by Server.mu.
type accessState struct {
	pve9    bool
	valid   map[string]bool
	special map[string]bool
	roles   map[string]map[string]bool
	users   map[string]*userEntry
	acl     *aclNode
}

var (
	userIDRE   = regexp.MustCompile(`^[^\s:/]+@[A-Za-z][A-Za-z0-9.\-_]+$`)
	tokenSubRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9.\-_]+$`)
)

func newAccess(o Options) (*accessState, error) {
	groups := privGroups9
	pve9 := !strings.HasPrefix(o.Version, "8.") && !strings.HasPrefix(o.Version, "7.")

	if !pve9 {
		groups = privGroups8
	}

	roles, valid := builtinRoles(groups)
	a := &accessState{pve9: pve9, valid: valid, special: map[string]bool{}, roles: roles,
		users: map[string]*userEntry{}, acl: &aclNode{}}

	for r := range roles {
		a.special[r] = true
	}

	a.users["root@pam"] = &userEntry{id: "root@pam", enable: true, tokens: map[string]*tokenEntry{}}

	addUser := func(id string) (*userEntry, error) {
		if !userIDRE.MatchString(id) {
			return nil, fmt.Errorf("user id %q: want name@realm", id)
		}

		if u := a.users[id]; u != nil {
			return u, nil
		}

		u := &userEntry{id: id, enable: true, tokens: map[string]*tokenEntry{}}
		a.users[id] = u

		return u, nil
	}

	addToken := func(id, secret, comment string, privsep bool) error {
		user, name, _ := strings.Cut(id, "!")
		if !tokenIDRE.MatchString(id) || !tokenSubRE.MatchString(name) || !tokenSecretRE.MatchString(secret) {
			return fmt.Errorf("token %q: want id user@realm!name and a secret of [A-Za-z0-9-]", id)
		}

		u, err := addUser(user)
		if err != nil {
			return err
		}

		u.tokens[name] = &tokenEntry{secret: secret, comment: comment, privsep: privsep}

		return nil
	}

	for id, pw := range o.Users {
		u, err := addUser(id)
		if err != nil {
			return nil, err
		}

		u.password = pw
	}

	for _, id := range slices.Sorted(maps.Keys(o.Tokens)) {
		if err := addToken(id, o.Tokens[id], "", false); err != nil {
			return nil, err
		}
	}

	if o.Access == nil {
		return a, nil
	}

	for _, su := range o.Access.Users {
		u, err := addUser(su.ID)
		if err != nil {
			return nil, err
		}

		u.password, u.comment, u.enable = su.Password, su.Comment, !su.Disabled
	}

	for _, t := range o.Access.Tokens {
		if err := addToken(t.ID, t.Secret, t.Comment, t.Privsep); err != nil {
			return nil, err
		}
	}

	for _, r := range o.Access.Roles {
		if a.special[r.ID] {
			return nil, fmt.Errorf("role %q is a built-in role", r.ID)
		}

		a.roles[r.ID] = map[string]bool{}

		for _, p := range r.Privs {
			if !a.valid[p] {
				return nil, fmt.Errorf("role %q: invalid privilege '%s'", r.ID, p)
			}

			a.roles[r.ID][p] = true
		}
	}

	for _, e := range o.Access.ACL {
		path, ok := normalizeACLPath(e.Path)
		if !ok || !checkACLPath(path) {
			return nil, fmt.Errorf("invalid ACL path '%s'", e.Path)
		}

		if a.roles[e.Role] == nil {
			return nil, fmt.Errorf("role '%s' does not exist", e.Role)
		}

		if !a.subjectExists(e.UGID) {
			return nil, fmt.Errorf("ACL %s: user or token '%s' does not exist", path, e.UGID)
		}

		a.setACL(path, e.UGID, e.Role, e.Propagate)
	}

	return a, nil
}

// subjectExists reports whether id names an existing user or token.
func (a *accessState) subjectExists(id string) bool {
	user, name, isToken := strings.Cut(id, "!")

	u := a.users[user]
	if u == nil {
		return false
	}

	return !isToken || u.tokens[name] != nil
}

func (a *accessState) token(id string) (*userEntry, *tokenEntry) {
	user, name, ok := strings.Cut(id, "!")
	if !ok {
		return nil, nil
	}

	u := a.users[user]
	if u == nil {
		return nil, nil
	}

	return u, u.tokens[name]
}

// aclNodeAt finds (create: makes) the node of path.
func (a *accessState) aclNodeAt(path string, create bool) *aclNode {
	n := a.acl

	for _, seg := range splitPath(path) {
		c := n.children[seg]
		if c == nil {
			if !create {
				return nil
			}

			if n.children == nil {
				n.children = map[string]*aclNode{}
			}

			c = &aclNode{}
			n.children[seg] = c
		}

		n = c
	}

	return n
}

func (a *accessState) setACL(path, ugid, role string, propagate bool) {
	n := a.aclNodeAt(path, true)

	m := &n.users
	if strings.Contains(ugid, "!") {
		m = &n.tokens
	}

	if *m == nil {
		*m = map[string]map[string]bool{}
	}

	if (*m)[ugid] == nil {
		(*m)[ugid] = map[string]bool{}
	}

	(*m)[ugid][role] = propagate
}

func (a *accessState) deleteACL(path, ugid, role string) {
	n := a.aclNodeAt(path, false)
	if n == nil {
		return
	}

	for _, m := range []map[string]map[string]bool{n.users, n.tokens} {
		if m[ugid] != nil {
			delete(m[ugid], role)

			if len(m[ugid]) == 0 {
				delete(m, ugid)
			}
		}
	}
}

// aclEntry is one ACL line, for GET /access/acl and iteration.
type aclEntry struct {
	path, typ, ugid, role string
	propagate             bool
}

// aclEntries walks the tree as iterate_acl_tree does (paths sorted here).
func (a *accessState) aclEntries() []aclEntry {
	var out []aclEntry

	var walk func(path string, n *aclNode)
	walk = func(path string, n *aclNode) {
		for typ, m := range map[string]map[string]map[string]bool{"user": n.users, "token": n.tokens} {
			for ugid, roles := range m {
				for role, prop := range roles {
					out = append(out, aclEntry{path: path, typ: typ, ugid: ugid, role: role, propagate: prop})
				}
			}
		}

		for _, k := range slices.Sorted(maps.Keys(n.children)) {
			p := path + "/" + k
			if path == "/" {
				p = "/" + k
			}

			walk(p, n.children[k])
		}
	}

	walk("/", a.acl)

	sort.SliceStable(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.path != y.path {
			return x.path < y.path
		}

		if x.ugid != y.ugid {
			return x.ugid < y.ugid
		}

		return x.role < y.role
	})

	return out
}

// aclPaths lists every path that has an ACL node with entries.
func (a *accessState) aclPaths() []string {
	seen := map[string]bool{}

	for _, e := range a.aclEntries() {
		seen[e.path] = true
	}

	return slices.Sorted(maps.Keys(seen))
}

// roles is PVE::AccessControl::roles: the roles of user (a user or token id) on path, role →
// propagate, after propagation along the path and NoAccess. Pools are not considered here.
func (a *accessState) rolesOf(user, path string) map[string]bool {
	if user == "root@pam" {
		return map[string]bool{"Administrator": true}
	}

	if u, t := a.token(user); strings.Contains(user, "!") {
		if t == nil {
			return map[string]bool{}
		}

		if !t.privsep {
			return a.rolesOf(u.id, path)
		}
	}

	roles := map[string]bool{}
	segs := splitPath(path)
	n := a.acl

	// the root node, then one node per segment
	for i := -1; i < len(segs); i++ {
		if i >= 0 {
			n = n.children[segs[i]]
			if n == nil {
				break
			}
		}

		final := i == len(segs)-1

		apply := func(ri map[string]bool) bool {
			var next map[string]bool

			for role, prop := range ri {
				if final || prop {
					if next == nil {
						next = map[string]bool{}
					}

					next[role] = prop
				}
			}

			if next != nil {
				roles = next
				return true
			}

			return false
		}

		if apply(n.tokens[user]) {
			continue
		}

		apply(n.users[user])
	}

	if p, ok := roles["NoAccess"]; ok {
		return map[string]bool{"NoAccess": p}
	}

	return roles
}

// permissions is PVE::RPCEnvironment::permissions: the privileges of user on path, privilege →
// propagate flag (informational). pools maps "/vms/<id>" to the pool the VM is in.
func (a *accessState) permissions(user, path string, poolOf func(path string) string) map[string]bool {
	if user == "root@pam" {
		out := map[string]bool{}
		for p := range a.roles["Administrator"] {
			out[p] = true
		}

		return out
	}

	owner := ""

	if strings.Contains(user, "!") {
		u, t := a.token(user)
		if t == nil {
			return map[string]bool{}
		}

		if !t.privsep {
			return a.permissions(u.id, path, poolOf)
		}

		owner = u.id
	} else if a.users[user] == nil {
		return map[string]bool{}
	}

	roles := a.rolesOf(user, path)

	// roles inherited from the pool a VM is in (compile_acl_path)
	if pool := poolOf(path); pool != "" {
		if pr := a.rolesOf(user, "/pool/"+pool); len(pr) > 0 {
			if _, no := roles["NoAccess"]; !no {
				if _, poolNo := pr["NoAccess"]; poolNo {
					roles = map[string]bool{"NoAccess": false}
				} else {
					for r := range pr {
						if _, ok := roles[r]; !ok {
							roles[r] = false
						}
					}
				}
			}
		}
	}

	privs := map[string]bool{}

	for r, prop := range roles {
		for p := range a.roles[r] {
			privs[p] = privs[p] || prop
		}
	}

	// privilege separated token: intersect with the owning user's privileges
	if owner != "" && owner != "root@pam" {
		up := a.permissions(owner, path, poolOf)
		for p, prop := range privs {
			uprop, ok := up[p]
			if !ok {
				delete(privs, p)
				continue
			}

			privs[p] = prop && uprop
		}
	}

	return privs
}

// normalizeACLPath is PVE::AccessControl::normalize_path.
func normalizeACLPath(p string) (string, bool) {
	if p == "" {
		return "", false
	}

	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}

	p = strings.TrimSuffix(p, "/")
	if p == "" {
		p = "/"
	}

	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}

	if !aclPathCharsRE.MatchString(p) {
		return "", false
	}

	return p, true
}

var (
	aclPathCharsRE = regexp.MustCompile(`^[[:alnum:].\-_/]+$`)
	// checkPathRE is PVE::AccessControl::check_path (pve-access-control 9.1.1).
	checkPathRE = regexp.MustCompile(`^(?:/|/access|/access/groups|/access/groups/[[:alnum:].\-_]+|/access/realm|/access/realm/[[:alnum:].\-_]+` +
		`|/nodes|/nodes/[[:alnum:].\-_]+|/pool|/pool/[A-Za-z0-9.\-_]+(?:/[A-Za-z0-9.\-_]+){0,2}` +
		`|/sdn|/sdn/controllers|/sdn/controllers/[[:alnum:]_\-]+|/sdn/dns|/sdn/dns/[[:alnum:]]+|/sdn/fabrics|/sdn/fabrics/[[:alnum:]]+` +
		`|/sdn/ipams|/sdn/ipams/[[:alnum:]]+|/sdn/prefix-lists|/sdn/prefix-lists/[[:alnum:]]+|/sdn/route-maps|/sdn/route-maps/[[:alnum:]]+` +
		`|/sdn/zones|/sdn/zones/[[:alnum:].\-_]+|/sdn/zones/[[:alnum:].\-_]+/[[:alnum:].\-_]+|/sdn/zones/[[:alnum:].\-_]+/[[:alnum:].\-_]+/[1-9][0-9]{0,3}` +
		`|/storage|/storage/[[:alnum:].\-_]+|/vms|/vms/[1-9][0-9]{2,}` +
		`|/mapping|/mapping/[[:alnum:].\-_]+|/mapping/[[:alnum:].\-_]+/[[:alnum:].\-_]+)$`)
)

func checkACLPath(p string) bool { return checkPathRE.MatchString(p) }

// removeSubjectACLs drops the ACL entries of a user or token (and the user's tokens').
func (a *accessState) removeSubjectACLs(id string) {
	for _, e := range a.aclEntries() {
		if e.ugid == id || strings.HasPrefix(e.ugid, id+"!") {
			a.deleteACL(e.path, e.ugid, e.role)
		}
	}
}
