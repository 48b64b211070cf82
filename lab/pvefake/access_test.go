package pvefake

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

const limitedSecret = "0b6f3c9e-1d2a-4e5f-8a7b-9c0d1e2f3a4b"

// startAccess runs a fake with the schema check on, the default root token and Access.
func startAccess(t *testing.T, version string, acc *Access) *Server {
	t.Helper()

	sv := "9"
	if version == "" || version[0] == '8' {
		sv = "8.4"
	}

	schema, err := pveschema.Load(sv)
	if err != nil {
		t.Fatal(err)
	}

	s := start(t, Options{Version: version, Schema: schema, Access: acc, Pools: []string{"talos"},
		PCIMappings: []string{"gpu"}})

	t.Cleanup(func() {
		if v := s.SchemaViolations(); len(v) > 0 {
			t.Errorf("schema violations: %v", v)
		}
	})

	return s
}

func tokenClient(t *testing.T, s *Server, id, secret string) *apiClient {
	c := newClient(t, s)
	c.auth = "PVEAPIToken=" + id + "=" + secret

	return c
}

// denied requires a 403 with PVE's reason phrase and {"data":null,"message":…}.
func denied(t *testing.T, r response, reason string) {
	t.Helper()

	if r.Code != http.StatusForbidden || r.Reason != reason {
		t.Fatalf("got %d %q %v, want 403 %q", r.Code, r.Reason, r.Body, reason)
	}

	if d, ok := r.Body["data"]; !ok || d != nil || r.Body["message"] != reason+"\n" {
		t.Fatalf("body %v, want data null and message %q", r.Body, reason+"\n")
	}
}

func privsOf(t *testing.T, c *apiClient, userid, path string) map[string]any {
	t.Helper()

	q := url.Values{"path": {path}}
	if userid != "" {
		q.Set("userid", userid)
	}

	m := c.ok("GET", "access/permissions", q).dataMap(t)
	p, _ := m[path].(map[string]any)

	return p
}

func TestPrivsepTokenLimitedByItsOwnACL(t *testing.T) {
	s := startAccess(t, "", &Access{
		Users:  []User{{ID: "ci@pve"}},
		Tokens: []Token{{ID: "ci@pve!sep", Secret: limitedSecret, Privsep: true}, {ID: "ci@pve!full", Secret: limitedSecret}},
		ACL: []ACL{
			{Path: "/vms", Role: "PVEVMAdmin", UGID: "ci@pve", Propagate: true},
			{Path: "/vms", Role: "PVEVMUser", UGID: "ci@pve!sep", Propagate: true},
			{Path: "/storage", Role: "PVEDatastoreAdmin", UGID: "ci@pve!sep", Propagate: true},
		},
	})
	root := newClient(t, s)

	sep := privsOf(t, root, "ci@pve!sep", "/vms/100")
	if sep["VM.PowerMgmt"] != float64(1) || sep["VM.Allocate"] != nil {
		t.Fatalf("privsep token on /vms/100: %v (want PVEVMUser ∩ PVEVMAdmin)", sep)
	}

	if st := privsOf(t, root, "ci@pve!sep", "/storage/local"); len(st) != 0 {
		t.Fatalf("privsep token on /storage/local: %v, want nothing (the user has no storage ACL)", st)
	}

	if full := privsOf(t, root, "ci@pve!full", "/vms/100"); full["VM.Allocate"] != float64(1) {
		t.Fatalf("token without privsep: %v, want the user's PVEVMAdmin", full)
	}

	// the token may not destroy a VM: VM.Allocate is the user's but not the token's
	c := tokenClient(t, s, "ci@pve!sep", limitedSecret)
	upid := root.ok("POST", "nodes/pve1/qemu", form("vmid", "100")).data().(string)
	root.waitTask("pve1", upid)
	denied(t, c.do("DELETE", "nodes/pve1/qemu/100", nil), "Permission check failed (/vms/100, VM.Allocate)")
	c.ok("POST", "nodes/pve1/qemu/100/status/start", nil)

	// VM lists only show what VM.Audit allows
	if l := c.ok("GET", "nodes/pve1/qemu", nil).dataList(t); len(l) != 1 {
		t.Fatalf("qemu list: %v", l)
	}

	noACL := tokenClient(t, s, "ci@pve!sep", limitedSecret)
	_ = noACL
}

func TestPropagateAndMostSpecificPath(t *testing.T) {
	s := startAccess(t, "9.1.1", &Access{
		Users: []User{{ID: "a@pve"}, {ID: "b@pve"}, {ID: "n@pve"}},
		ACL: []ACL{
			{Path: "/vms", Role: "PVEVMAdmin", UGID: "a@pve", Propagate: false},
			{Path: "/vms", Role: "PVEVMAdmin", UGID: "b@pve", Propagate: true},
			{Path: "/vms/101", Role: "PVEAuditor", UGID: "b@pve", Propagate: true},
			{Path: "/", Role: "Administrator", UGID: "n@pve", Propagate: true},
			{Path: "/vms/102", Role: "NoAccess", UGID: "n@pve", Propagate: true},
		},
	})
	root := newClient(t, s)

	if p := privsOf(t, root, "a@pve", "/vms"); p["VM.Allocate"] != float64(0) {
		t.Fatalf("a on /vms: %v, want VM.Allocate not propagated (0)", p)
	}

	if p := privsOf(t, root, "a@pve", "/vms/100"); len(p) != 0 {
		t.Fatalf("a on /vms/100: %v, want nothing (propagate=0)", p)
	}

	if p := privsOf(t, root, "b@pve", "/vms/100"); p["VM.Allocate"] != float64(1) {
		t.Fatalf("b on /vms/100: %v", p)
	}

	if p := privsOf(t, root, "b@pve", "/vms/101"); p["VM.Allocate"] != nil || p["VM.Audit"] != float64(1) {
		t.Fatalf("b on /vms/101: %v, want only PVEAuditor (most specific wins)", p)
	}

	if p := privsOf(t, root, "n@pve", "/vms/102"); len(p) != 0 {
		t.Fatalf("n on /vms/102: %v, want NoAccess", p)
	}

	if p := privsOf(t, root, "n@pve", "/vms/103"); p["Permissions.Modify"] != float64(1) {
		t.Fatalf("n on /vms/103: %v, want Administrator", p)
	}

	// the whole tree, as PVE's get_effective_permissions
	all := root.ok("GET", "access/permissions", form("userid", "b@pve")).dataMap(t)
	for _, p := range []string{"/vms", "/vms/101"} {
		if _, ok := all[p]; !ok {
			t.Fatalf("effective permissions of b lack %s: %v", p, all)
		}
	}

	if _, ok := all["/storage"]; ok {
		t.Fatalf("effective permissions list /storage without privileges: %v", all)
	}
}

func TestPoolInheritance(t *testing.T) {
	s := startAccess(t, "", &Access{
		Users:  []User{{ID: "p@pve"}},
		Tokens: []Token{{ID: "p@pve!tk", Secret: limitedSecret}},
		ACL: []ACL{
			{Path: "/pool/talos", Role: "PVEVMAdmin", UGID: "p@pve", Propagate: true},
			{Path: "/storage", Role: "PVEDatastoreUser", UGID: "p@pve", Propagate: true},
			{Path: "/sdn/zones/localnetwork", Role: "PVESDNUser", UGID: "p@pve", Propagate: true},
		},
	})
	root := newClient(t, s)
	c := tokenClient(t, s, "p@pve!tk", limitedSecret)

	// VM.Allocate on /pool/talos allows creating a VM in the pool, not outside it
	denied(t, c.do("POST", "nodes/pve1/qemu", form("vmid", "200")), "Permission check failed")
	upid := c.ok("POST", "nodes/pve1/qemu", form("vmid", "201", "pool", "talos", "memory", "2048",
		"scsi0", "local-lvm:1", "net0", "model=virtio,bridge=vmbr0")).data().(string)

	if st := c.waitTask("pve1", upid); st != "OK" {
		t.Fatalf("create in pool: %s", st)
	}

	// the VM inherits the pool's ACL (propagate 0 on the VM, as PVE reports pool roles)
	if p := privsOf(t, root, "p@pve", "/vms/201"); p["VM.PowerMgmt"] != float64(0) {
		t.Fatalf("pool member: %v", p)
	}

	c.ok("POST", "nodes/pve1/qemu/201/status/start", nil)
	root.ok("POST", "nodes/pve1/qemu", form("vmid", "202"))
	denied(t, c.do("POST", "nodes/pve1/qemu/202/status/start", nil), "Permission check failed (/vms/202, VM.PowerMgmt)")

	res := c.ok("GET", "cluster/resources", form("type", "vm")).dataList(t)
	if len(res) != 1 || res[0].(map[string]any)["vmid"] != float64(201) {
		t.Fatalf("cluster resources of the pool user: %v", res)
	}
}

func TestVMCreateDenials(t *testing.T) {
	s := startAccess(t, "", &Access{
		Users: []User{{ID: "ci@pve"}},
		Tokens: []Token{
			{ID: "ci@pve!novm", Secret: limitedSecret, Privsep: true},
			{ID: "ci@pve!nostore", Secret: limitedSecret, Privsep: true},
			{ID: "ci@pve!nomap", Secret: limitedSecret, Privsep: true},
		},
		Roles: []Role{{ID: "Provisioner", Privs: []string{"VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory",
			"VM.Config.Network", "VM.Config.HWType", "VM.Config.Options", "VM.Audit", "VM.PowerMgmt"}}},
		ACL: []ACL{
			{Path: "/", Role: "Administrator", UGID: "ci@pve", Propagate: true},
			{Path: "/vms", Role: "Provisioner", UGID: "ci@pve!novm", Propagate: true},
			{Path: "/storage", Role: "PVEDatastoreUser", UGID: "ci@pve!novm", Propagate: true},
			{Path: "/vms", Role: "PVEVMAdmin", UGID: "ci@pve!nostore", Propagate: true},
			{Path: "/storage/local", Role: "PVEDatastoreUser", UGID: "ci@pve!nostore", Propagate: true},
			{Path: "/vms", Role: "PVEVMAdmin", UGID: "ci@pve!nomap", Propagate: true},
			{Path: "/storage", Role: "PVEDatastoreUser", UGID: "ci@pve!nomap", Propagate: true},
		},
	})

	create := form("vmid", "100", "memory", "2048", "scsi0", "local-lvm:8", "hostpci0", "mapping=gpu,pcie=1")

	// Qemu.pm create_vm raises a bare raise_perm_exc() when neither /vms/{vmid} nor the pool grants VM.Allocate
	denied(t, tokenClient(t, s, "ci@pve!novm", limitedSecret).do("POST", "nodes/pve1/qemu", create),
		"Permission check failed")
	denied(t, tokenClient(t, s, "ci@pve!nostore", limitedSecret).do("POST", "nodes/pve1/qemu", create),
		"Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)")
	denied(t, tokenClient(t, s, "ci@pve!nomap", limitedSecret).do("POST", "nodes/pve1/qemu", create),
		"Permission check failed (/mapping/pci/gpu, Mapping.Use)")

	// the schema's own check: DELETE needs VM.Allocate on /vms/{vmid}
	root := newClient(t, s)
	root.waitTask("pve1", root.ok("POST", "nodes/pve1/qemu", form("vmid", "101")).data().(string))
	denied(t, tokenClient(t, s, "ci@pve!novm", limitedSecret).do("DELETE", "nodes/pve1/qemu/101", nil),
		"Permission check failed (/vms/101, VM.Allocate)")

	// nothing was created
	if l := root.ok("GET", "nodes/pve1/qemu", nil).dataList(t); len(l) != 1 {
		t.Fatalf("VMs: %v", l)
	}
}

func TestAccessAPI(t *testing.T) {
	s := startAccess(t, "", nil)
	root := newClient(t, s)

	root.ok("POST", "access/users", form("userid", "ci@pve", "comment", "CI"))
	root.ok("POST", "access/roles", form("roleid", "Boot", "privs", "VM.PowerMgmt,VM.Audit"))

	tok := root.ok("POST", "access/users/ci@pve/token/deploy", form("privsep", "1")).dataMap(t)
	if tok["full-tokenid"] != "ci@pve!deploy" || tok["value"] == "" {
		t.Fatalf("token answer %v", tok)
	}

	if info, _ := tok["info"].(map[string]any); info["privsep"] != float64(1) {
		t.Fatalf("token info %v", tok)
	}

	secret := tok["value"].(string)
	c := tokenClient(t, s, "ci@pve!deploy", secret)

	// no ACL yet: the token sees nothing and may do nothing
	if l := c.ok("GET", "cluster/resources", form("type", "vm")).dataList(t); len(l) != 0 {
		t.Fatalf("resources without ACL: %v", l)
	}

	denied(t, c.do("GET", "nodes/pve1/storage/local/status", nil), "Permission check failed (/storage/local, Datastore.Audit|Datastore.AllocateSpace)")
	denied(t, c.do("PUT", "access/acl", form("path", "/", "roles", "Administrator", "tokens", "ci@pve!deploy")),
		"Permission check failed (/, Permissions.Modify)")

	for _, who := range []string{"users", "tokens"} {
		id := map[string]string{"users": "ci@pve", "tokens": "ci@pve!deploy"}[who]
		root.ok("PUT", "access/acl", form("path", "/vms", "roles", "Boot", who, id))
	}

	acl := root.ok("GET", "access/acl", nil).dataList(t)
	if len(acl) != 2 {
		t.Fatalf("acl %v", acl)
	}

	perms := c.ok("GET", "access/permissions", nil).dataMap(t)
	if p, _ := perms["/vms"].(map[string]any); p["VM.PowerMgmt"] != float64(1) || len(p) != 2 {
		t.Fatalf("own permissions %v", perms)
	}

	role := root.ok("GET", "access/roles/PVEVMUser", nil).dataMap(t)
	if role["VM.PowerMgmt"] != float64(1) || role["VM.Allocate"] != nil {
		t.Fatalf("PVEVMUser %v", role)
	}

	root.ok("DELETE", "access/users/ci@pve/token/deploy", nil)

	if r := c.do("GET", "version", nil); r.Code != http.StatusUnauthorized {
		t.Fatalf("deleted token: %d", r.Code)
	}

	if l := root.ok("GET", "access/acl", nil).dataList(t); len(l) != 1 {
		t.Fatalf("acl after token delete %v", l)
	}
}

func TestBuiltinRoles(t *testing.T) {
	r9, _ := builtinRoles(privGroups9)
	r8, _ := builtinRoles(privGroups8)

	for _, c := range []struct {
		roles map[string]map[string]bool
		role  string
		has   []string
		lacks []string
	}{
		{r9, "PVEVMUser", []string{"VM.Audit", "VM.PowerMgmt", "VM.Console", "VM.Backup", "VM.Config.CDROM", "VM.GuestAgent.Audit"}, []string{"VM.Allocate"}},
		{r9, "PVEVMAdmin", []string{"VM.Allocate", "VM.GuestAgent.Unrestricted", "VM.Replicate"}, []string{"Datastore.Allocate"}},
		{r8, "PVEVMAdmin", []string{"VM.Allocate", "VM.Monitor"}, []string{"VM.GuestAgent.Audit"}},
		{r9, "PVEAdmin", []string{"Mapping.Use", "Sys.Console"}, []string{"Mapping.Modify", "Sys.Modify", "Permissions.Modify"}},
		{r9, "PVEDatastoreUser", []string{"Datastore.AllocateSpace", "Datastore.Audit"}, []string{"Datastore.Allocate"}},
		{r9, "PVEAuditor", []string{"VM.Audit", "Sys.Audit", "Datastore.Audit", "Pool.Audit", "Mapping.Audit", "SDN.Audit"}, []string{"VM.PowerMgmt"}},
		{r9, "PVEPoolAdmin", []string{"Pool.Allocate", "Pool.Audit"}, nil},
		{r9, "PVEMappingUser", []string{"Mapping.Use", "Mapping.Audit"}, []string{"Mapping.Modify"}},
		{r9, "PVEMappingAdmin", []string{"Mapping.Modify", "Mapping.Use", "Mapping.Audit"}, nil},
		{r9, "Administrator", []string{"Permissions.Modify", "Sys.Modify", "Realm.Allocate"}, nil},
		{r9, "NoAccess", nil, []string{"VM.Audit"}},
	} {
		for _, p := range c.has {
			if !c.roles[c.role][p] {
				t.Errorf("%s lacks %s", c.role, p)
			}
		}

		for _, p := range c.lacks {
			if c.roles[c.role][p] {
				t.Errorf("%s has %s", c.role, p)
			}
		}
	}
}

// TestMappingListFilteredAndDeniedRecorded: GET /cluster/mapping/pci lists only the mappings the
// caller may audit, use or modify (pve-manager's Cluster/Mapping/PCI.pm); every 403 is recorded.
func TestMappingListFilteredAndDeniedRecorded(t *testing.T) {
	t.Parallel()

	s := startAccess(t, "9.1.3", &Access{
		Tokens: []Token{{ID: "talos@pve!ab", Secret: limitedSecret, Privsep: false}},
		ACL:    []ACL{{Path: "/vms", Role: "PVEVMAdmin", UGID: "talos@pve", Propagate: true}},
	})
	c := tokenClient(t, s, "talos@pve!ab", limitedSecret)

	if got := c.ok("GET", "/cluster/mapping/pci", nil).dataList(t); len(got) != 0 {
		t.Errorf("without Mapping.* the list shows %v", got)
	}

	s.access.setACL("/mapping/pci/gpu", "talos@pve", "PVEMappingUser", true)

	if got := c.ok("GET", "/cluster/mapping/pci", nil).dataList(t); len(got) != 1 {
		t.Errorf("with Mapping.Use the list shows %v", got)
	}

	denied(t, c.do("GET", "/nodes/pve1/storage/local/content", nil), "Permission check failed (/storage/local, Datastore.Audit|Datastore.AllocateSpace)")

	if d := s.Denied(); len(d) != 1 || d[0] != "GET /nodes/pve1/storage/local/content: Permission check failed (/storage/local, Datastore.Audit|Datastore.AllocateSpace)" {
		t.Errorf("Denied() = %q", d)
	}
}
