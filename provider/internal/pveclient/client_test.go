package pveclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePVE answers the calls this package makes the way Proxmox VE 8 does (envelope {"data": …},
// errors as HTTP status with a message), with a hook to fail calls.
type fakePVE struct {
	mu       sync.Mutex
	guests   []Guest
	tasks    []taskEntry
	fail     map[string]int // "METHOD /path" → failures still to answer (503)
	calls    map[string]int
	token    string
	deleteOK bool // the DELETE takes effect even when its answer fails (a lost answer)
	running  bool // the destroy task keeps running
}

func (f *fakePVE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()

	key := r.Method + " " + strings.TrimPrefix(r.URL.Path, "/api2/json")
	f.calls[key]++

	if r.Header.Get("Authorization") != "PVEAPIToken="+f.token {
		http.Error(w, `{"data":null}`, http.StatusUnauthorized)
		return
	}

	if f.fail[key] > 0 {
		f.fail[key]--
		if r.Method == http.MethodDelete && f.deleteOK {
			f.guests = nil
		}

		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"data":null,"message":"cfs-lock 'file-replication_cfg' error: got lock request timeout"}`))

		return
	}

	answer := func(v any) { _ = json.NewEncoder(w).Encode(map[string]any{"data": v}) }

	switch {
	case key == "GET /cluster/resources":
		answer(f.guests)
	case key == "GET /nodes/pve1/tasks":
		var out []taskEntry
		for _, t := range f.tasks {
			if t.ID == r.URL.Query().Get("vmid") {
				out = append(out, t)
			}
		}
		answer(out)
	case key == "DELETE /nodes/pve1/qemu/812345":
		if r.URL.Query().Get("purge") != "1" || r.URL.Query().Get("destroy-unreferenced-disks") != "1" {
			http.Error(w, "missing purge", http.StatusBadRequest)
			return
		}
		f.guests = nil
		answer("UPID:pve1:00000001:00000002:00000003:qmdestroy:812345:root@pam!t:")
	case strings.HasPrefix(key, "GET /nodes/pve1/tasks/UPID:pve1:00000001"):
		if f.running {
			answer(map[string]any{"status": "running"})
			return
		}
		answer(map[string]any{"status": "stopped", "exitstatus": "OK"})
	default:
		http.Error(w, key, http.StatusNotImplemented)
	}
}

func newFake(t *testing.T) (*fakePVE, *Client) {
	t.Helper()

	f := &fakePVE{fail: map[string]int{}, calls: map[string]int{}, token: "root@pam!t=secret"}
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)

	c, err := New(Credentials{Endpoint: srv.URL + "/", APIToken: f.token, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}

	c.Retry = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}

	return f, c
}

func TestGuestAndStartHistory(t *testing.T) {
	f, c := newFake(t)
	f.guests = []Guest{{VMID: 812345, Node: "pve1", Name: "cp-1", Status: "stopped", RawTags: "controlplane;homelab;talos"}}
	f.fail["GET /cluster/resources"] = 2 // a busy API: repeated

	g, err := c.Guest(context.Background(), 812345)
	if err != nil || g == nil || g.Name != "cp-1" || strings.Join(g.Tags(), ",") != "controlplane,homelab,talos" {
		t.Fatalf("guest %+v, %v", g, err)
	}

	if g, err := c.Guest(context.Background(), 1); g != nil || err != nil {
		t.Errorf("no VM 1: %+v, %v", g, err)
	}

	for _, tc := range []struct {
		name  string
		tasks []taskEntry
		want  bool
	}{
		{"created, never started", []taskEntry{{Type: "qmcreate", ID: "812345", StartTime: 100}}, false},
		{"started after create", []taskEntry{{Type: "qmcreate", ID: "812345", StartTime: 100}, {Type: "qmstart", ID: "812345", StartTime: 101}}, true},
		// The id was used by an earlier VM that ran: its start is older than this create.
		{"reused id", []taskEntry{{Type: "qmstart", ID: "812345", StartTime: 50}, {Type: "qmcreate", ID: "812345", StartTime: 100}}, false},
		{"create no longer in the history", []taskEntry{{Type: "qmconfig", ID: "812345", StartTime: 100}}, true},
	} {
		f.tasks = tc.tasks
		if got, err := c.StartedSinceCreated(context.Background(), "pve1", 812345); err != nil || got != tc.want {
			t.Errorf("%s: started %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestReadsGiveUpAfterTheRetries(t *testing.T) {
	f, c := newFake(t)
	f.fail["GET /cluster/resources"] = 100

	if _, err := c.Guest(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "HTTP 503: cfs-lock") {
		t.Errorf("want the last 503, have %v", err)
	}

	if n := f.calls["GET /cluster/resources"]; n != 1+len(c.Retry) {
		t.Errorf("%d reads, want %d", n, 1+len(c.Retry))
	}
}

func TestDestroy(t *testing.T) {
	f, c := newFake(t)
	f.guests = []Guest{{VMID: 812345, Node: "pve1", Name: "cp-1", Status: "stopped"}}
	f.fail["DELETE /nodes/pve1/qemu/812345"] = 1 // refused before it had an effect: sent again

	if err := c.Destroy(context.Background(), "pve1", 812345); err != nil {
		t.Fatal(err)
	}

	if n := f.calls["DELETE /nodes/pve1/qemu/812345"]; n != 2 || f.guests != nil {
		t.Errorf("%d destroys, guests %v", n, f.guests)
	}

	// The answer is lost but the VM is gone: done, not sent again.
	f.guests = []Guest{{VMID: 812345, Node: "pve1"}}
	f.fail["DELETE /nodes/pve1/qemu/812345"] = 1
	f.deleteOK = true
	f.calls = map[string]int{}

	if err := c.Destroy(context.Background(), "pve1", 812345); err != nil || f.calls["DELETE /nodes/pve1/qemu/812345"] != 1 {
		t.Errorf("lost answer: %v, %d destroys", err, f.calls["DELETE /nodes/pve1/qemu/812345"])
	}
}

func TestCredentialsAndEndpoint(t *testing.T) {
	if (Credentials{Endpoint: "https://pve:8006"}).Usable() {
		t.Error("no token and no password is not usable")
	}

	if !(Credentials{Endpoint: "https://pve:8006", Username: "root@pam", Password: "x"}).Usable() {
		t.Error("user and password are usable")
	}

	if _, err := New(Credentials{Endpoint: "pve1:8006"}); err == nil {
		t.Error("an endpoint without a scheme was accepted")
	}

	_, c := newFake(t)
	c.creds.APIToken = "root@pam!t=wrong"

	if _, err := c.Guest(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("a wrong token: %v", err)
	}
}
