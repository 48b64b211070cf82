package pvefake

import (
	"context"
	"reflect"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

// clusterStatus starts a fake with the PVE 9 schema check on and reads GET /cluster/status.
func clusterStatus(t *testing.T, opts Options) []any {
	t.Helper()

	sch, err := pveschema.Load("9")
	if err != nil {
		t.Fatal(err)
	}

	opts.Schema = sch
	opts.Version = "9.1.3"
	s := start(t, opts)
	list := newClient(t, s).ok("GET", "cluster/status", nil).dataList(t)

	if v := s.SchemaViolations(); len(v) > 0 {
		t.Errorf("schema violations: %v", v)
	}

	return list
}

func TestClusterStatusStandaloneHost(t *testing.T) {
	t.Parallel()

	got := clusterStatus(t, Options{})
	want := []any{map[string]any{"type": "node", "id": "node/pve1", "name": "pve1", "ip": "127.0.0.1",
		"local": float64(1), "nodeid": float64(0), "online": float64(1), "level": ""}}

	if !reflect.DeepEqual(got, want) {
		t.Fatalf("standalone: %v\nwant %v", got, want)
	}
}

func TestClusterStatusCluster(t *testing.T) {
	t.Parallel()

	got := clusterStatus(t, Options{Nodes: []string{"pve2", "pve1", "pve3"}, NodeIPs: map[string]string{"pve3": "192.0.2.13"}})
	if len(got) != 4 {
		t.Fatalf("want a cluster entry and 3 nodes: %v", got)
	}

	wantCluster := map[string]any{"type": "cluster", "id": "cluster", "name": DefaultClusterName,
		"nodes": float64(3), "quorate": float64(1), "version": float64(3)}
	if !reflect.DeepEqual(got[0], wantCluster) {
		t.Fatalf("cluster entry %v, want %v", got[0], wantCluster)
	}

	// sorted by name; corosync ids in join order (Options.Nodes); the first node answers
	want := []struct {
		name, ip      string
		nodeid, local float64
	}{{"pve1", "127.0.0.1", 2, 0}, {"pve2", "127.0.0.1", 1, 1}, {"pve3", "192.0.2.13", 3, 0}}

	for i, w := range want {
		e := got[i+1].(map[string]any)
		if e["type"] != "node" || e["id"] != "node/"+w.name || e["name"] != w.name || e["ip"] != w.ip ||
			e["nodeid"] != w.nodeid || e["local"] != w.local || e["online"] != float64(1) || e["level"] != "" {
			t.Errorf("node %d: %v, want %+v", i, e, w)
		}
	}

	one := clusterStatus(t, Options{ClusterName: "homelab"})
	if len(one) != 2 || one[0].(map[string]any)["name"] != "homelab" || one[1].(map[string]any)["nodeid"] != float64(1) {
		t.Fatalf("one-node cluster: %v", one)
	}
}

func TestClusterStatusNeedsSysAuditOnRoot(t *testing.T) {
	t.Parallel()

	s := startAccess(t, "9.1.3", &Access{
		Users: []User{{ID: "ccm@pve"}},
		Tokens: []Token{
			{ID: "ccm@pve!audit", Secret: limitedSecret, Privsep: true},
			{ID: "ccm@pve!vms", Secret: limitedSecret, Privsep: true},
		},
		ACL: []ACL{
			{Path: "/", Role: "PVEAuditor", UGID: "ccm@pve", Propagate: true},
			{Path: "/", Role: "PVEAuditor", UGID: "ccm@pve!audit", Propagate: true},
			{Path: "/vms", Role: "PVEAuditor", UGID: "ccm@pve!vms", Propagate: true},
		},
	})

	if l := tokenClient(t, s, "ccm@pve!audit", limitedSecret).ok("GET", "cluster/status", nil).dataList(t); len(l) != 1 {
		t.Fatalf("status: %v", l)
	}

	denied(t, tokenClient(t, s, "ccm@pve!vms", limitedSecret).do("GET", "cluster/status", nil),
		"Permission check failed (/, Sys.Audit)")
}

func TestClusterNameIsCheckedLikePvecm(t *testing.T) {
	t.Parallel()

	for _, name := range []string{"a-name-longer-than-15", "under_score", "-lead"} {
		if s, err := Start(context.Background(), Options{ClusterName: name}); err == nil {
			_ = s.Close()
			t.Errorf("cluster name %q accepted", name)
		}
	}
}
