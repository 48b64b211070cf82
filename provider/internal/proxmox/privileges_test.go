package proxmox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

func privCluster() *spec.Cluster {
	return &spec.Cluster{
		Name: "homelab", TalosVersion: "v1.11.5",
		Image: spec.Image{FactoryURL: "https://factory.talos.dev", SchematicID: "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba", Platform: "nocloud", Arch: "amd64",
			DatastoreID: "local", ContentType: spec.ContentImport, GuestAgent: true},
		Nodes: []spec.Node{
			{Name: "cp-1", HostNode: "pve1", VMID: 105, DatastoreID: "local-lvm", Bridge: "vmbr0"},
			{Name: "worker-1", HostNode: "pve2", DatastoreID: "local-lvm", Bridge: "vmbr1", VLANID: 20,
				DataDisks:  []spec.DataDisk{{SizeGiB: 100, DatastoreID: "ceph"}},
				PCIDevices: []spec.PCIDevice{{Mapping: "gpu"}, {ID: "0000:01:00.0"}}},
		},
	}
}

// privs renders needs as "path: priv priv …" lines.
func privs(needs []Need) []string {
	var out []string

	for _, n := range needs {
		line := n.Path + ":"
		if len(out) > 0 && strings.HasPrefix(out[len(out)-1], line) {
			out[len(out)-1] += " " + n.Priv
			continue
		}

		out = append(out, line+" "+n.Priv)
	}

	return out
}

// TestRequiredPrivileges: per path, what the cluster needs; the guest agent's privilege by PVE
// version; pinned ids, assigned ids; the image's datastore and hosts; data disks' datastores; a
// bridge with a VLAN; a PCI mapping (a device by id needs root, which no role gives).
func TestRequiredPrivileges(t *testing.T) {
	t.Parallel()

	vm := "VM.Allocate VM.Audit VM.Config.CPU VM.Config.Memory VM.Config.Disk VM.Config.Network VM.Config.HWType VM.Config.Options VM.PowerMgmt"

	for _, tc := range []struct {
		pve9  bool
		agent string
	}{{true, "VM.GuestAgent.Audit"}, {false, "VM.Monitor"}} {
		got := privs(Required(privCluster(), map[string]int{"worker-1": 812345}, tc.pve9))
		want := []string{
			"/mapping/pci/gpu: Mapping.Use",
			"/nodes/pve1: Sys.AccessNetwork",
			"/nodes/pve2: Sys.AccessNetwork",
			"/sdn/zones/localnetwork/vmbr0: SDN.Use",
			"/sdn/zones/localnetwork/vmbr1/20: SDN.Use",
			"/storage/ceph: Datastore.AllocateSpace",
			"/storage/local: Datastore.AllocateTemplate Datastore.Allocate Datastore.AllocateSpace",
			"/storage/local-lvm: Datastore.AllocateSpace",
			"/vms/105: " + vm + " " + tc.agent,
			"/vms/812345: " + vm + " " + tc.agent,
		}

		if !slices.Equal(got, want) {
			t.Errorf("PVE 9 %v:\n got %s\nwant %s", tc.pve9, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
		}
	}

	// no guest agent, no assigned id, a shared image datastore that also holds the disks
	c := privCluster()
	c.Image.GuestAgent, c.Image.SharedDatastore, c.Image.DatastoreID = false, true, "ceph"
	c.Nodes = c.Nodes[1:]
	c.Nodes[0].DataDisks, c.Nodes[0].PCIDevices, c.Nodes[0].DatastoreID = nil, nil, "ceph"

	got := privs(Required(c, nil, true))
	want := []string{
		"/nodes/pve2: Sys.AccessNetwork",
		"/sdn/zones/localnetwork/vmbr1/20: SDN.Use",
		"/storage/ceph: Datastore.AllocateTemplate Datastore.Allocate Datastore.AllocateSpace",
		"/vms: " + vm,
	}

	if !slices.Equal(got, want) {
		t.Errorf("shared datastore:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

func TestIsPVE9(t *testing.T) {
	t.Parallel()

	for v, want := range map[string]bool{"9.1.3": true, "8.4.1": false, "8.4": false, "10.0": true, "": true, "7.4-3": false} {
		if IsPVE9(v) != want {
			t.Errorf("IsPVE9(%q) = %v", v, !want)
		}
	}
}

type fakePerms struct {
	version string
	have    map[string][]string
	fail    error

	mu    sync.Mutex
	asked []string
}

func (f *fakePerms) Version(context.Context) (string, error) { return f.version, nil }

func (f *fakePerms) Permissions(_ context.Context, path string) (map[string]bool, error) {
	f.mu.Lock()
	f.asked = append(f.asked, path)
	f.mu.Unlock()

	if f.fail != nil {
		return nil, f.fail
	}

	out := map[string]bool{}
	for _, p := range f.have[path] {
		out[p] = true
	}

	return out, nil
}

// TestPrivilegeProblems: every missing privilege is reported, one error per path, naming the
// privilege, the path and what needs it; alternatives Proxmox accepts are accepted; one request
// per distinct path; a failed read is an error (the caller warns).
func TestPrivilegeProblems(t *testing.T) {
	t.Parallel()

	c := privCluster()
	c.Nodes = c.Nodes[:1]

	all := func(pve9 bool) map[string][]string {
		have := map[string][]string{}
		for _, n := range Required(c, nil, pve9) {
			have[n.Path] = append(have[n.Path], n.Priv)
		}

		return have
	}

	token := pveclient.Credentials{Endpoint: "https://pve1:8006/", APIToken: "talos@pve!pulumi=s3cr3t"}

	api := &fakePerms{version: "9.1.3", have: all(true)}
	if problems, _, err := checkPrivileges(t.Context(), api, token, c, nil); err != nil || len(problems) > 0 {
		t.Fatalf("with every privilege: %v %v", problems, err)
	}

	slices.Sort(api.asked)
	if len(api.asked) != 6 || len(slices.Compact(slices.Clone(api.asked))) != 6 {
		t.Errorf("asked %v: want each of the 5 paths and / once", api.asked)
	}

	// PVE 8 names the agent's privilege VM.Monitor: PVE 9's does not serve
	api = &fakePerms{version: "8.4.1", have: all(true)}
	problems, _, _ := checkPrivileges(t.Context(), api, token, c, nil)
	if len(problems) != 1 || problems[0].Error() != "proxmoxve:apiToken: the token talos@pve!pulumi lacks VM.Monitor "+
		"(read the VMs' addresses from the QEMU guest agent) on /vms/105; grant them (docs/install.md) or use a token with the TalosProxmox role" {
		t.Errorf("PVE 8 with PVE 9's privileges: %v", problems)
	}

	// without PowerMgmt and Allocate on the VM, AllocateSpace on the disks' datastore, and
	// without anything on the host: three errors, one per path, each naming all it lacks
	have := all(true)
	have["/vms/105"] = slices.DeleteFunc(have["/vms/105"], func(p string) bool { return p == "VM.PowerMgmt" || p == "VM.Allocate" })
	have["/storage/local-lvm"] = nil
	delete(have, "/nodes/pve1")

	problems, hidden, _ := checkPrivileges(t.Context(), &fakePerms{version: "9.1.3", have: have}, token, c, nil)
	want := []string{
		"proxmoxve:apiToken: the token talos@pve!pulumi lacks Sys.AccessNetwork (download the Talos image; or Sys.Audit and Sys.Modify on /) " +
			"on /nodes/pve1; grant them (docs/install.md) or use a token with the TalosProxmox role",
		"proxmoxve:apiToken: the token talos@pve!pulumi lacks Datastore.AllocateSpace (allocate the VMs' disks, EFI disks and cloud-init drives) " +
			"on /storage/local-lvm; grant them (docs/install.md) or use a token with the TalosProxmox role",
		"proxmoxve:apiToken: the token talos@pve!pulumi lacks VM.Allocate (create and destroy the VMs) and VM.PowerMgmt (start and stop the VMs) " +
			"on /vms/105; grant them (docs/install.md) or use a token with the TalosProxmox role",
	}

	if got := errStrings(problems); !slices.Equal(got, want) {
		t.Errorf("problems:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}

	if !hidden(fmt.Errorf(`nodes.cp-1.datastoreId: datastore "local-lvm" does not exist on pve1 (datastores: local)`)) ||
		hidden(fmt.Errorf(`image.datastoreId: datastore "local" does not exist on pve1 (datastores: local-lvm)`)) {
		t.Error("a datastore the token cannot see must hide its 'does not exist', and only its")
	}

	// alternatives: Audit instead of AllocateSpace on the image's datastore, Sys.Audit and
	// Sys.Modify on / instead of Sys.AccessNetwork on the host, GuestAgent.Unrestricted
	have = all(true)
	have["/storage/local"] = []string{"Datastore.AllocateTemplate", "Datastore.Allocate", "Datastore.Audit"}
	have["/nodes/pve1"] = nil
	have["/"] = []string{"Sys.Audit", "Sys.Modify"}
	have["/vms/105"] = append(slices.DeleteFunc(have["/vms/105"], func(p string) bool { return p == "VM.GuestAgent.Audit" }), "VM.GuestAgent.Unrestricted")

	if problems, _, _ := checkPrivileges(t.Context(), &fakePerms{version: "9.1.3", have: have}, token, c, nil); len(problems) > 0 {
		t.Errorf("alternatives PVE accepts were refused: %v", problems)
	}

	// a user and password: the same check, in the user's name
	user := pveclient.Credentials{Endpoint: "https://pve1:8006/", Username: "alice@pve", Password: "x"}
	have = all(true)
	have["/storage/local"] = []string{"Datastore.AllocateSpace"}

	problems, _, _ = checkPrivileges(t.Context(), &fakePerms{version: "9.1.3", have: have}, user, c, nil)
	if got := errStrings(problems); len(got) != 1 || !strings.HasPrefix(got[0], "proxmoxve:username: the user alice@pve lacks "+
		"Datastore.AllocateTemplate (download the Talos image) and Datastore.Allocate (delete replaced Talos images) on /storage/local;") ||
		!strings.HasSuffix(got[0], "or use a user with the TalosProxmox role") {
		t.Errorf("a user's problems: %v", got)
	}

	if _, _, err := checkPrivileges(t.Context(), &fakePerms{version: "9.1.3", fail: errors.New("HTTP 501")}, token, c, nil); err == nil ||
		!strings.Contains(err.Error(), "GET /access/permissions") {
		t.Errorf("an unreadable /access/permissions: %v", err)
	}
}

func errStrings(errs []error) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}

	return out
}

// TestTokenPrivileges: a consumer's token needs its role made (/access), its user and token made
// (/access/groups, the pve realm) and its ACLs granted on each node's VM and datastore —
// Permissions.Modify there, or VM.Allocate / Datastore.Allocate with every privilege of the role;
// a node whose id Proxmox chooses is granted on /vms.
func TestTokenPrivileges(t *testing.T) {
	t.Parallel()

	c := privCluster()
	tok := spec.ProxmoxToken{Input: "proxmoxCsi", Consumer: "csi", Privileges: []string{"VM.Audit", "VM.Config.Disk"}, Storages: []string{"local-lvm"}}
	c.ProxmoxTokens = []spec.ProxmoxToken{tok}

	if got, want := TokenACLPaths(c, tok, nil), []string{"/vms/105", "/vms", "/storage/local-lvm"}; !slices.Equal(got, want) {
		t.Errorf("ACL paths without an assigned id: %v, want %v", got, want)
	}

	needs := tokenNeeds(c, tok, map[string]int{"worker-1": 812345})

	var lines []string
	for _, n := range needs {
		line := n.Path + " " + n.Priv
		if n.Alt != nil {
			line += " | " + n.Alt.Path + " " + strings.Join(n.Alt.Privs, " ")
		}

		lines = append(lines, line)
	}

	want := []string{
		"/access Sys.Modify", "/access/groups User.Modify", "/access/realm/pve Realm.AllocateUser",
		"/vms/105 Permissions.Modify | /vms/105 VM.Allocate VM.Audit VM.Config.Disk",
		"/vms/812345 Permissions.Modify | /vms/812345 VM.Allocate VM.Audit VM.Config.Disk",
		"/storage/local-lvm Permissions.Modify | /storage/local-lvm Datastore.Allocate VM.Audit VM.Config.Disk",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("token needs:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	all := privs(Required(c, map[string]int{"worker-1": 812345}, true))
	if !slices.Contains(all, "/access: Sys.Modify") || !slices.ContainsFunc(all, func(l string) bool {
		return strings.HasPrefix(l, "/vms/812345:") && strings.HasSuffix(l, "Permissions.Modify")
	}) {
		t.Errorf("Required leaves out the token's needs: %v", all)
	}
}
