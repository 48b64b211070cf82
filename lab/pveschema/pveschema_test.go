package pveschema

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
)

// talosCreate is POST /nodes/pve1/qemu as bpg sends it for the component (see
// lab/pvefake/vms_test.go createTalosVM).
func talosCreate() map[string][]string {
	p := map[string][]string{}
	kv := []string{
		"vmid", "100", "name", "cp-1", "cores", "2", "sockets", "1", "memory", "4096",
		"agent", "enabled=1,fstrim_cloned_disks=0,type=virtio", "bios", "ovmf", "machine", "q35",
		"scsihw", "virtio-scsi-pci", "ostype", "l26", "onboot", "1", "tags", "talos;cluster-a,lab",
		"scsi0", "file=local-lvm:0,import-from=local:import/talos.qcow2,size=21474836480,discard=on,ssd=1,",
		"efidisk0", "file=local-lvm:1,format=raw,efitype=4m,pre-enrolled-keys=0",
		"ide2", "file=local-lvm:cloudinit,format=raw",
		"ipconfig0", "gw=10.0.0.1,ip=10.0.0.11/24", "nameserver", "1.1.1.1 9.9.9.9",
		"net0", "model=virtio,bridge=vmbr0,firewall=0",
		"hostpci0", "mapping=gpu,pcie=1",
		"boot", "order=scsi0;net0",
	}

	for i := 0; i < len(kv); i += 2 {
		p[kv[i]] = []string{kv[i+1]}
	}

	return p
}

func with(p map[string][]string, kv ...string) map[string][]string {
	out := map[string][]string{}
	for k, v := range p {
		out[k] = v
	}

	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = []string{kv[i+1]}
		}
	}

	return out
}

func each(t *testing.T, f func(t *testing.T, s *Schema)) {
	t.Helper()

	for _, v := range Versions() {
		t.Run("pve"+v, func(t *testing.T) {
			s, err := Load(v)
			if err != nil {
				t.Fatal(err)
			}

			f(t, s)
		})
	}
}

func TestVersionsAndSources(t *testing.T) {
	if got := Versions(); !slices.Equal(got, []string{"8.4", "9"}) {
		t.Fatalf("Versions() = %v", got)
	}

	each(t, func(t *testing.T, s *Schema) {
		if len(s.Source.Commit) != 40 || s.Source.Package == "" || s.Source.Date == "" {
			t.Errorf("source = %+v", s.Source)
		}

		if n := len(s.Endpoints()); n < 150 {
			t.Errorf("%d endpoints", n)
		}
	})

	if _, err := Load("7"); err == nil {
		t.Fatal("Load(7) succeeded")
	}
}

func TestTalosVMCreatePasses(t *testing.T) {
	each(t, func(t *testing.T, s *Schema) {
		if err := s.CheckRequest("POST", "/nodes/pve1/qemu", talosCreate()); err != nil {
			t.Fatal(err)
		}
	})
}

// violation checks that err is an *Error naming endpoint and field with a rule containing rule.
func violation(t *testing.T, err error, endpoint, field, rule string) {
	t.Helper()

	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a violation of %s %s, got %v", field, rule, err)
	}

	if e.Endpoint != endpoint {
		t.Errorf("endpoint %q, want %q", e.Endpoint, endpoint)
	}

	for _, v := range e.Violations {
		if v.Field == field && strings.Contains(v.Rule, rule) {
			if !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), field) {
				t.Errorf("message %q lacks endpoint or field", err)
			}

			return
		}
	}

	t.Errorf("no violation %s: %s in %v", field, rule, err)
}

func TestRequestViolations(t *testing.T) {
	const create = "/nodes/{node}/qemu"

	cases := []struct {
		name, path      string
		params          map[string][]string
		endpoint, field string
		rule            string
	}{
		{"unknown parameter", "/nodes/pve1/qemu", with(talosCreate(), "frobnicate", "1"), create, "frobnicate", "property is not defined in schema"},
		{"bad enum", "/nodes/pve1/qemu", with(talosCreate(), "bios", "uefi"), create, "bios", "does not have a value in the enumeration 'seabios, ovmf'"},
		{"bad property-string key", "/nodes/pve1/qemu", with(talosCreate(), "net0", "model=virtio,bridge=vmbr0,speed=10"), create, "net0", "invalid key in comma-separated list property: speed"},
		{"bad property-string enum", "/nodes/pve1/qemu", with(talosCreate(), "net0", "model=virtio2"), create, "net0.model", "enumeration"},
		{"bad named property-string key", "/nodes/pve1/qemu", with(talosCreate(), "hostpci0", "mapping=gpu,pci=1"), create, "hostpci0", "invalid key in comma-separated list property: pci"},
		{"bad ipconfig address", "/nodes/pve1/qemu", with(talosCreate(), "ipconfig0", "ip=10.0.0.300/24"), create, "ipconfig0.ip", "CIDR"},
		{"missing required", "/nodes/pve1/qemu", with(talosCreate(), "vmid", ""), create, "vmid", "property is missing and it is not optional"},
		{"missing required path-less", "PUT /nodes/pve1/qemu/100/resize", map[string][]string{"disk": {"scsi0"}}, "/nodes/{node}/qemu/{vmid}/resize", "size", "property is missing"},
		{"bad integer", "/nodes/pve1/qemu", with(talosCreate(), "cores", "two"), create, "cores", "type check ('integer') failed"},
		{"below minimum", "/nodes/pve1/qemu", with(talosCreate(), "vmid", "99"), create, "vmid", "valid VM ID"},
		{"bad boolean", "/nodes/pve1/qemu", with(talosCreate(), "onboot", "2"), create, "onboot", "type check ('boolean') failed"},
		{"index out of range", "/nodes/pve1/qemu", with(talosCreate(), "scsi31", "local-lvm:1"), create, "scsi31", "out of range"},
		{"bad pattern", "/nodes/pve1/qemu", with(talosCreate(), "machine", "q36"), create, "machine.type", "regex pattern"},
		{"bad tag", "/nodes/pve1/qemu", with(talosCreate(), "tags", "a;b c;!x"), create, "tags", "invalid tag '!x'"},
		{"bad path vmid", "/nodes/pve1/qemu/abc/config", nil, "/nodes/{node}/qemu/{vmid}/config", "vmid", "type check ('integer')"},
		{"bad path node", "/nodes/pve_1/qemu/100/config", nil, "/nodes/{node}/qemu/{vmid}/config", "node", "valid node name"},
		{"bad storage id", "GET /nodes/pve1/storage/1x/status", nil, "/nodes/{node}/storage/{storage}/status", "storage", "illegal characters"},
		{"maximum", "/nodes/pve1/qemu", with(talosCreate(), "net0", "model=virtio,tag=4095"), create, "net0.tag", "maximum value of 4094"},
		{"maxLength", "/nodes/pve1/qemu/100/config", map[string][]string{"description": {strings.Repeat("a", 9000)}}, "/nodes/{node}/qemu/{vmid}/config", "description", "characters long"},
	}

	each(t, func(t *testing.T, s *Schema) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				method, path := "POST", tc.path
				if m, p, ok := strings.Cut(tc.path, " "); ok {
					method, path = m, p
				}

				violation(t, s.CheckRequest(method, path, tc.params), tc.endpoint, tc.field, tc.rule)
			})
		}
	})
}

func TestMethodAndPath(t *testing.T) {
	each(t, func(t *testing.T, s *Schema) {
		violation(t, s.CheckRequest("PATCH", "/nodes/pve1/qemu", nil), "/nodes/{node}/qemu", "", "method not defined")
		violation(t, s.CheckRequest("GET", "/nodes/pve1/nope", nil), "/nodes/pve1/nope", "", "no such API path")

		if tmpl, vars, _ := s.Match("/api2/json/nodes/pve1/qemu/100/status/current"); tmpl != "/nodes/{node}/qemu/{vmid}/status/current" || vars["vmid"] != "100" {
			t.Errorf("Match = %s %v", tmpl, vars)
		}

		if tmpl, _, _ := s.Match("/cluster/mapping/pci"); tmpl != "/cluster/mapping/pci" {
			t.Errorf("Match = %s", tmpl)
		}
	})
}

func TestAliasesAndDefaultKeys(t *testing.T) {
	each(t, func(t *testing.T, s *Schema) {
		ok := []map[string][]string{
			with(talosCreate(), "net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=0"),
			with(talosCreate(), "net0", "virtio,bridge=vmbr0"),
			with(talosCreate(), "scsi0", "local-lvm:8"),
			with(talosCreate(), "agent", "1"),
			with(talosCreate(), "hostpci0", "0000:01:00.0,pcie=1"),
			with(talosCreate(), "boot", "cdn"),
			with(talosCreate(), "ipconfig0", "ip=dhcp"),
			with(talosCreate(), "onboot", "true"),
		}

		for _, p := range ok {
			if err := s.CheckRequest("POST", "/nodes/pve1/qemu", p); err != nil {
				t.Error(err)
			}
		}

		violation(t, s.CheckRequest("POST", "/nodes/pve1/qemu", with(talosCreate(), "net0", "virtio=BC:24:11:00:00:01,model=e1000")),
			"/nodes/{node}/qemu", "net0", "duplicate key")
		violation(t, s.CheckRequest("POST", "/nodes/pve1/qemu", with(talosCreate(), "net0", "bridge=vmbr0")),
			"/nodes/{node}/qemu", "net0.model", "property is missing")
		violation(t, s.CheckRequest("POST", "/nodes/pve1/qemu", with(talosCreate(), "net0", "virtio=01:24:11:00:00:01")),
			"/nodes/{node}/qemu", "net0.macaddr", "unicast MAC")
	})
}

func TestResponses(t *testing.T) {
	each(t, func(t *testing.T, s *Schema) {
		good := map[string]any{
			"upid": "UPID:pve1:00001234:00005678:65000000:qmcreate:100:root@pam:", "node": "pve1",
			"pid": float64(1234), "pstart": float64(5678), "starttime": float64(1.7e9), "type": "qmcreate",
			"id": "100", "user": "root@pam", "status": "stopped", "exitstatus": "OK",
		}

		if err := s.CheckResponse("GET", "/nodes/pve1/tasks/x/status", good); err != nil {
			t.Error(err)
		}

		bad := map[string]any{}
		for k, v := range good {
			bad[k] = v
		}

		bad["pid"] = "1234"
		violation(t, s.CheckResponse("GET", "/nodes/pve1/tasks/x/status", bad), "/nodes/{node}/tasks/{upid}/status", "data.pid", "type check ('integer') failed - got JSON string")

		bad["pid"] = float64(1234)
		bad["status"] = "done"
		violation(t, s.CheckResponse("GET", "/nodes/pve1/tasks/x/status", bad), "/nodes/{node}/tasks/{upid}/status", "data.status", "enumeration")

		delete(bad, "node")
		violation(t, s.CheckResponse("GET", "/nodes/pve1/tasks/x/status", bad), "/nodes/{node}/tasks/{upid}/status", "data.node", "property is missing")

		violation(t, s.CheckResponse("GET", "/cluster/resources", map[string]any{}), "/cluster/resources", "data", "type check ('array')")
		violation(t, s.CheckResponse("GET", "/cluster/resources", []any{map[string]any{"id": "qemu/100", "type": "qemu", "vmid": "100"}}),
			"/cluster/resources", "data[0].vmid", "type check ('integer')")

		// type "object" without properties accepts anything of its type
		if err := s.CheckResponse("GET", "/nodes/pve1/qemu/100/agent/network-get-interfaces", map[string]any{"result": []any{1, "x"}}); err != nil {
			t.Error(err)
		}

		// returned VM configuration: property strings are checked too
		conf := map[string]any{"digest": "0123456789abcdef0123456789abcdef01234567", "scsi0": "local-lvm:vm-100-disk-0,discard=on,size=1G,ssd=1",
			"net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=0", "boot": "order=scsi0;net0", "hostpci0": "mapping=gpu,pcie=1"}
		if err := s.CheckResponse("GET", "/nodes/pve1/qemu/100/config", conf); err != nil {
			t.Error(err)
		}

		conf["net0"] = "virtio=BC:24:11:00:00:01,bridge=vmbr0,speed=1"
		violation(t, s.CheckResponse("GET", "/nodes/pve1/qemu/100/config", conf), "/nodes/{node}/qemu/{vmid}/config", "data.net0", "invalid key")
	})
}

// TestEveryFormatIsCheckedOrListed keeps UncheckedFormats exact: every named format of the
// vendored schemas is either checked or listed.
func TestEveryFormatIsCheckedOrListed(t *testing.T) {
	used := map[string]bool{}

	for _, v := range Versions() {
		s, err := Load(v)
		if err != nil {
			t.Fatal(err)
		}

		walkAll(s, func(p *prop) {
			if p.format != "" {
				used[p.format] = true
			}
		})
	}

	var missing, extra []string

	for f := range used {
		if !checkedFormat(f) && !slices.Contains(UncheckedFormats, f) {
			missing = append(missing, f)
		}
	}

	for _, f := range UncheckedFormats {
		if !used[f] || checkedFormat(f) {
			extra = append(extra, f)
		}
	}

	sort.Strings(missing)
	sort.Strings(extra)

	if len(missing)+len(extra) > 0 {
		t.Errorf("unchecked but not listed: %v; listed but unused or checked: %v", missing, extra)
	}
}

func TestPerlPatterns(t *testing.T) {
	cases := []struct {
		pattern, value string
		match          bool
	}{
		{`(?^:\d+(?:-\d+)?(?:;\d+(?:-\d+)?)*)`, "10;20-30", true},
		{`[A-Za-z0-9\-_\s]{,16}`, "abc def", true},
		{`[A-Za-z0-9\-_\s]{,16}`, strings.Repeat("a", 17), false},
		{`(?^:^((?>[+-]?[\w\-\._=]+,?)+)$)`, "+aes,-pcid", true},
		{`\S+`, "a b", false},
	}

	for _, c := range cases {
		re, err := perlRegexp(c.pattern)
		if err != nil {
			t.Fatal(err)
		}

		if re.MatchString(c.value) != c.match {
			t.Errorf("%s ~ %q = %v", c.pattern, c.value, !c.match)
		}
	}
}

func TestPermissions(t *testing.T) {
	s, err := Load("9")
	if err != nil {
		t.Fatal(err)
	}

	perms, allow, tmpl, vars, ok := s.Permissions("DELETE", "/api2/json/nodes/pve1/qemu/100")
	if !ok || !allow || tmpl != "/nodes/{node}/qemu/{vmid}" || vars["vmid"] != "100" {
		t.Fatalf("got %v %v %q %v %v", perms, allow, tmpl, vars, ok)
	}

	check, _ := perms["check"].([]any)
	if len(check) != 3 || check[0] != "perm" || check[1] != "/vms/{vmid}" {
		t.Fatalf("check = %v", perms)
	}

	if _, allow, _, _, _ := s.Permissions("POST", "/access/ticket"); allow {
		t.Fatal("POST /access/ticket allows tokens")
	}
}
