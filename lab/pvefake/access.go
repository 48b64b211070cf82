package pvefake

import (
	"maps"
	"slices"
)

// PVE's access control, as pve-access-control's PVE::AccessControl (roles, ACL tree,
// propagation, NoAccess) and PVE::RPCEnvironment (permissions: pool inheritance, privilege
// separated tokens) compute it. Groups are not modelled.

// Access pre-seeds PVE's access control (Options.Access): users, API tokens, custom roles and
// ACL entries, as if created through /access. root@pam always exists and is all-powerful.
type Access struct {
	Users  []User
	Tokens []Token
	// Roles are custom roles; built-in roles (Administrator, PVEVMAdmin, …) always exist.
	Roles []Role
	ACL   []ACL
}

// User is a PVE user "name@realm" (realm pam or pve).
type User struct {
	ID string
	// Password allows ticket logins (POST /access/ticket); empty: none.
	Password string
	Comment  string
	// Disabled users (enable=0) cannot log in and their tokens are refused.
	Disabled bool
}

// Token is an API token "user@realm!name". Its user is created if it does not exist.
type Token struct {
	ID string
	// Secret is the token value (PVE generates a UUID; here it must match [A-Za-z0-9-]+).
	Secret  string
	Comment string
	// Privsep is PVE's privilege separation: the token's privileges are the intersection of
	// its user's and its own ACLs. Without it the token has its user's privileges.
	Privsep bool
}

// Role is a custom role with its privileges.
type Role struct {
	ID    string
	Privs []string
}

// ACL grants Role on Path to UGID, a user id or a token id.
type ACL struct {
	Path string
	Role string
	UGID string
	// Propagate applies the entry to sub-paths too. PVE's API defaults to propagate=1; here the
	// zero value is "not propagated", so set it.
	Propagate bool
}

// privGroups is PVE::AccessControl's $privgroups: per category the root-only, admin, user and
// audit privileges, from which create_roles builds the built-in roles.
type privGroup struct {
	cat                     string
	root, admin, user, audt []string
}

// privGroups9 is $privgroups of pve-access-control master 5ccd07d9302562b73374d331b63d25b04b86766c
// (9.1.1, src/PVE/AccessControl.pm).
var privGroups9 = []privGroup{
	{cat: "VM",
		admin: []string{"VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network", "VM.Config.HWType",
			"VM.Config.Options", "VM.Allocate", "VM.Clone", "VM.GuestAgent.Unrestricted", "VM.Migrate", "VM.Replicate",
			"VM.Snapshot", "VM.Snapshot.Rollback"},
		user: []string{"VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.Backup", "VM.GuestAgent.FileRead",
			"VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.FileWrite", "VM.PowerMgmt"},
		audt: []string{"VM.Audit", "VM.GuestAgent.Audit"}},
	{cat: "Sys", root: []string{"Sys.PowerMgmt", "Sys.Modify", "Sys.Incoming", "Sys.AccessNetwork"},
		admin: []string{"Sys.Console", "Sys.Syslog"}, audt: []string{"Sys.Audit"}},
	{cat: "Datastore", admin: []string{"Datastore.Allocate", "Datastore.AllocateTemplate"},
		user: []string{"Datastore.AllocateSpace"}, audt: []string{"Datastore.Audit"}},
	{cat: "SDN", admin: []string{"SDN.Allocate", "SDN.Audit"}, user: []string{"SDN.Use"}, audt: []string{"SDN.Audit"}},
	{cat: "User", root: []string{"Realm.Allocate"}, admin: []string{"User.Modify", "Group.Allocate", "Realm.AllocateUser"}},
	{cat: "Pool", admin: []string{"Pool.Allocate"}, user: []string{"Pool.Audit"}, audt: []string{"Pool.Audit"}},
	{cat: "Mapping", admin: []string{"Mapping.Modify"}, user: []string{"Mapping.Use"}, audt: []string{"Mapping.Audit"}},
}

// privGroups8 is $privgroups of pve-access-control stable-bookworm
// 0f258e710ec5a7dfd23d054a29cf0ba65fec2362 (8.2.3, PVE 8.4): VM.Monitor instead of the
// VM.GuestAgent.* privileges, no VM.Replicate.
var privGroups8 = func() []privGroup {
	g := slices.Clone(privGroups9)
	g[0] = privGroup{cat: "VM",
		admin: []string{"VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network", "VM.Config.HWType",
			"VM.Config.Options", "VM.Allocate", "VM.Clone", "VM.Migrate", "VM.Monitor", "VM.Snapshot", "VM.Snapshot.Rollback"},
		user: []string{"VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.Backup", "VM.PowerMgmt"},
		audt: []string{"VM.Audit"}}

	return g
}()

// builtinRoles is create_roles: Administrator (every privilege), NoAccess (none), PVEAdmin,
// PVE<cat>Admin, PVE<cat>User, PVEAuditor, PVETemplateUser.
func builtinRoles(groups []privGroup) (roles map[string]map[string]bool, valid map[string]bool) {
	roles = map[string]map[string]bool{"NoAccess": {}}
	valid = map[string]bool{"Permissions.Modify": true}

	add := func(role string, privs ...string) {
		if roles[role] == nil {
			roles[role] = map[string]bool{}
		}

		for _, p := range privs {
			roles[role][p] = true
		}
	}

	for _, g := range groups {
		for _, p := range slices.Concat(g.root, g.admin, g.user, g.audt) {
			valid[p] = true
		}

		all := slices.Concat(g.admin, g.user, g.audt)
		add("PVE"+g.cat+"Admin", all...)
		add("PVEAdmin", all...)

		if len(g.user) > 0 {
			add("PVE"+g.cat+"User", slices.Concat(g.user, g.audt)...)
		}

		add("PVEAuditor", g.audt...)
	}

	delete(roles["PVEAdmin"], "Mapping.Modify")
	add("PVETemplateUser", "VM.Clone", "VM.Audit")
	roles["Administrator"] = maps.Clone(valid)

	return roles, valid
}
