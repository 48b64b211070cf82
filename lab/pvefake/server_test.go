package pvefake

import (
	"context"
	"crypto/tls"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestStartRefusesNonLoopbackAddresses(t *testing.T) {
	t.Parallel()

	for _, addr := range []string{"0.0.0.0:0", "[::1]:0", "10.0.0.1:0", "localhost:0"} {
		if _, err := Start(context.Background(), Options{Addr: addr}); err == nil {
			t.Errorf("Start(%q) succeeded, want a loopback-only error", addr)
		}
	}
}

func TestServesTLS13Only(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})

	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true, //nolint:gosec // test
	}}}
	if res, err := old.Get(s.URL() + "/api2/json/version"); err == nil {
		_ = res.Body.Close()
		t.Fatal("a TLS 1.2 client connected")
	}

	c := newClient(t, s)
	v := c.ok("GET", "version", nil).dataMap(t)

	if v["version"] != DefaultVersion || v["release"] != "8.4" {
		t.Errorf("version = %v", v)
	}
}

func TestTokenAuthentication(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	c := newClient(t, s)

	cases := []struct{ auth, reason string }{
		{"", "No ticket"},
		{"PVEAPIToken=root@pam!lab=00000000-0000-0000-0000-000000000000", "invalid token value!"},
		{"PVEAPIToken=root@pam!other=" + DefaultTokenSecret, "no such token 'other' for user 'root@pam'"},
	}

	for _, tc := range cases {
		c.auth = tc.auth
		r := c.do("GET", "version", nil)

		if r.Code != http.StatusUnauthorized || r.Reason != tc.reason {
			t.Errorf("auth %q: %d %q, want 401 %q", tc.auth, r.Code, r.Reason, tc.reason)
		}
	}
}

func TestTicketAuthentication(t *testing.T) {
	t.Parallel()

	s := start(t, Options{Users: map[string]string{"root@pam": "secret"}})
	c := newClient(t, s)
	c.auth = ""

	if r := c.do("POST", "access/ticket", form("username", "root@pam", "password", "wrong")); r.Code != 401 || r.Reason != "authentication failure" {
		t.Fatalf("bad password: %d %q", r.Code, r.Reason)
	}

	login := c.ok("POST", "access/ticket", form("username", "root@pam", "password", "secret")).dataMap(t)
	c.extra = http.Header{"Cookie": {"PVEAuthCookie=" + login["ticket"].(string)}}

	c.ok("GET", "nodes", nil)

	if r := c.do("POST", "nodes/pve1/qemu", form("vmid", "100")); r.Code != 401 || !strings.Contains(r.Reason, "invalid csrf token") {
		t.Fatalf("write without CSRF token: %d %q", r.Code, r.Reason)
	}

	c.extra.Set("CSRFPreventionToken", login["CSRFPreventionToken"].(string))
	c.ok("POST", "nodes/pve1/qemu", form("vmid", "100"))
}

func TestUnknownRoutesAnswer501NamingTheRoute(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	c := newClient(t, s)

	r := c.do("GET", "nodes/pve1/lxc", nil)
	if r.Code != http.StatusNotImplemented || r.Reason != "Method 'GET /nodes/pve1/lxc' not implemented" {
		t.Fatalf("got %d %q", r.Code, r.Reason)
	}

	if n := s.CallCount("UNKNOWN GET /nodes/pve1/lxc"); n != 1 {
		t.Errorf("unknown call count = %d", n)
	}
}

func TestErrorsCarryPVEWordingInReasonAndBody(t *testing.T) {
	t.Parallel()

	s := start(t, Options{Nodes: []string{"pve1", "pve2"}})
	c := newClient(t, s)

	r := c.do("GET", "nodes/pve1/qemu/100/config", nil)
	want := "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist"

	if r.Code != 500 || r.Reason != want || r.Body["message"] != want+"\n" || r.Body["data"] != nil {
		t.Fatalf("got %d %q %v", r.Code, r.Reason, r.Body)
	}

	r = c.do("POST", "nodes/pve1/qemu", form("vmid", "100", "bogus", "1", "cores", "many"))
	errs, _ := r.Body["errors"].(map[string]any)

	if r.Code != 400 || r.Reason != "Parameter verification failed." ||
		!strings.Contains(errs["bogus"].(string), "property is not defined in schema") ||
		errs["cores"] != "type check ('integer') failed - got 'many'\n" {
		t.Fatalf("got %d %q %v", r.Code, r.Reason, r.Body)
	}

	if r := c.do("GET", "nodes/pve9/qemu", nil); r.Code != 500 || !strings.HasPrefix(r.Reason, "hostname lookup 'pve9' failed") {
		t.Fatalf("unknown node: %d %q", r.Code, r.Reason)
	}
}

func TestTaskIDsHavePVEsUPIDFormat(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	c := newClient(t, s)

	upid := c.ok("POST", "nodes/pve1/qemu", form("vmid", "123")).data().(string)
	re := regexp.MustCompile(`^UPID:pve1:[0-9A-F]{8}:[0-9A-F]{8}:[0-9A-F]{8}:qmcreate:123:root@pam!lab:$`)

	if !re.MatchString(upid) {
		t.Fatalf("UPID %q does not match %s", upid, re)
	}

	st := c.ok("GET", "nodes/pve1/tasks/"+upid+"/status", nil).dataMap(t)
	if st["status"] != "stopped" || st["exitstatus"] != "OK" || st["user"] != "root@pam" || st["tokenid"] != "lab" {
		t.Fatalf("status = %v", st)
	}

	log := c.ok("GET", "nodes/pve1/tasks/"+upid+"/log", nil).dataList(t)
	if last := log[len(log)-1].(map[string]any); last["t"] != "TASK OK" {
		t.Fatalf("log = %v", log)
	}

	if r := c.do("GET", "nodes/pve1/tasks/UPID:pve1:00000001:00000001:00000001:qmstart:1:root@pam:/status", nil); r.Code != 400 {
		t.Fatalf("unknown task: %d %v", r.Code, r.Body)
	}
}
