package pvefake

import (
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

// TestSchemaCheckOption runs the opt-in schema check (Options.Schema) over a Talos VM's
// creation, configuration read and a bad request, for both schema versions.
func TestSchemaCheckOption(t *testing.T) {
	t.Parallel()

	for _, v := range pveschema.Versions() {
		sch, err := pveschema.Load(v)
		if err != nil {
			t.Fatal(err)
		}

		s := start(t, Options{Schema: sch})
		c := newClient(t, s)

		if _, err := s.AddFile("pve1", "local", "import/talos.qcow2", QCOW2Image(1<<30)); err != nil {
			t.Fatal(err)
		}

		createTalosVM(t, c)
		c.ok("GET", "nodes/pve1/qemu/100/config", nil)
		c.ok("GET", "nodes/pve1/qemu/100/status/current", nil)
		c.ok("GET", "cluster/resources", nil)

		if got := s.SchemaViolations(); len(got) != 0 {
			t.Errorf("PVE %s: violations %q", v, got)
		}

		c.do("POST", "nodes/pve1/qemu", form("vmid", "101", "frobnicate", "1"))

		got := s.SchemaViolations()
		if len(got) != 1 || !strings.Contains(got[0], "request POST /nodes/{node}/qemu: frobnicate: property is not defined") ||
			!strings.Contains(got[0], "(fake answered 400)") {
			t.Errorf("PVE %s: violations %q", v, got)
		}

		if req, resp := s.SchemaChecks(); req < 6 || resp < 5 {
			t.Errorf("PVE %s: checked %d requests, %d responses", v, req, resp)
		}
	}
}

// TestClusterResourcesOmitStatusOnlyFields: /cluster/resources entries are extract_vm_stats and
// extract_node_stats, without status/current's pid and running-qemu or /nodes' ssl_fingerprint
// (found by the schema check in strict mode).
func TestClusterResourcesOmitStatusOnlyFields(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	c := newClient(t, s)

	if _, err := s.AddFile("pve1", "local", "import/talos.qcow2", QCOW2Image(1<<30)); err != nil {
		t.Fatal(err)
	}

	createTalosVM(t, c)

	upid := c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string)
	if exit := c.waitTask("pve1", upid); exit != "OK" {
		t.Fatalf("start: %s", exit)
	}

	for _, e := range c.ok("GET", "cluster/resources", nil).dataList(t) {
		m := e.(map[string]any)
		for _, k := range []string{"pid", "running-qemu", "ssl_fingerprint"} {
			if _, ok := m[k]; ok {
				t.Errorf("%s has %s", m["id"], k)
			}
		}
	}
}

// TestEveryRouteIsInPVESchema: each route the fake serves is a method of PVE's API in both
// vendored schema versions.
func TestEveryRouteIsInPVESchema(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	sample := strings.NewReplacer("{node}", "pve1", "{vmid}", "100", "{storage}", "local",
		"{volume}", "local:iso%2Fx.iso", "{upid}", "UPID:pve1:1:2:3:x:y:root@pam:", "{type}", "pci",
		"{poolid}", "p1")

	for _, v := range pveschema.Versions() {
		sch, err := pveschema.Load(v)
		if err != nil {
			t.Fatal(err)
		}

		endpoints := map[string]bool{}
		for _, e := range sch.Endpoints() {
			endpoints[e] = true
		}

		for _, key := range s.Routes() {
			method, pattern, _ := strings.Cut(key, " ")

			tmpl, _, ok := sch.Match(sample.Replace(pattern))
			if !ok || !endpoints[method+" "+tmpl] {
				t.Errorf("PVE %s has no %s (matched %q)", v, key, tmpl)
			}
		}
	}
}

// TestRouteParamsAgainstPVESchema logs where a route's accepted parameters (the fake's own
// allow-list) differ from PVE's schema.
func TestRouteParamsAgainstPVESchema(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	sample := strings.NewReplacer("{node}", "pve1", "{vmid}", "100", "{storage}", "local",
		"{volume}", "local:iso%2Fx.iso", "{upid}", "UPID:pve1:1:2:3:x:y:root@pam:", "{type}", "pci",
		"{poolid}", "p1")

	for _, v := range pveschema.Versions() {
		sch, _ := pveschema.Load(v)

		for _, rt := range s.routes {
			if rt.params == nil {
				continue
			}

			names, _ := sch.Parameters(rt.method, sample.Replace(rt.pattern))

			var extra, missing []string

			for _, p := range rt.params {
				if !slices.Contains(names, p) {
					extra = append(extra, p)
				}
			}

			for _, n := range names {
				if !slices.Contains(rt.params, n) && !strings.Contains(rt.pattern, "{"+n+"}") {
					missing = append(missing, n)
				}
			}

			if len(extra)+len(missing) > 0 {
				t.Logf("PVE %s %s: fake accepts, PVE lacks %v; PVE has, fake rejects %v", v, rt.key(), extra, missing)
			}
		}
	}
}
