package pvefake

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRuleScorePrefersTheMostSpecificRule(t *testing.T) {
	t.Parallel()

	key := "POST /nodes/{node}/qemu/{vmid}/status/start"
	rules := map[string]int{
		"POST /nodes/{node}/qemu/{vmid}/status/start": 0,
		"/nodes/{node}/qemu/{vmid}/status/start":      0,
		"POST /nodes/{node}/qemu/*":                   0,
		"/nodes/*":                                    0,
		"GET /nodes/{node}/qemu/{vmid}/status/start":  0,
		"POST /nodes/{node}/qemu":                     0,
	}

	if best, _ := bestRule(rules, key); best != "POST /nodes/{node}/qemu/{vmid}/status/start" {
		t.Fatalf("best = %q", best)
	}

	delete(rules, "POST /nodes/{node}/qemu/{vmid}/status/start")
	delete(rules, "/nodes/{node}/qemu/{vmid}/status/start")

	if best, _ := bestRule(rules, key); best != "POST /nodes/{node}/qemu/*" {
		t.Fatalf("best = %q", best)
	}

	if _, ok := bestRule(map[string]int{"POST /nodes/{node}/qemu": 0}, key); ok {
		t.Fatal("an exact rule matched a longer route")
	}
}

func TestFailNextFailsWithoutSideEffect(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	c := newClient(t, s)
	s.FailNext("POST /nodes/{node}/qemu", 1)

	r := c.do("POST", "nodes/pve1/qemu", form("vmid", "100"))
	if r.Code != 500 && r.Code != 503 {
		t.Fatalf("injected failure: %d %q", r.Code, r.Reason)
	}

	if len(s.VMs()) != 0 || len(s.Tasks()) != 0 {
		t.Fatal("the failed call had an effect")
	}

	c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu", form("vmid", "100")).data().(string))

	if n := s.CallCount("POST /nodes/{node}/qemu"); n != 2 {
		t.Fatalf("calls = %d", n)
	}
}

func TestFailureRateIsDeterministicPerSeed(t *testing.T) {
	t.Parallel()

	pattern := func(seed uint64) string {
		s := start(t, Options{FailureRate: 0.5, Seed: seed, Logf: func(string, ...any) {}})
		c := newClient(t, s)

		var b strings.Builder
		for range 40 {
			fmt.Fprintf(&b, "%d,", c.do("GET", "version", nil).Code)
		}

		return b.String()
	}

	a, b, other := pattern(7), pattern(7), pattern(8)
	if a != b {
		t.Fatalf("same seed, different failures:\n%s\n%s", a, b)
	}

	if a == other {
		t.Fatal("different seeds fail the same way")
	}

	if !strings.Contains(a, "200") || (!strings.Contains(a, "500") && !strings.Contains(a, "503")) {
		t.Fatalf("pattern = %s", a)
	}
}

func TestTaskLatencyKeepsTasksRunning(t *testing.T) {
	t.Parallel()

	s := start(t, Options{RouteLatency: map[string]time.Duration{"POST /nodes/{node}/qemu": 300 * time.Millisecond}})
	c := newClient(t, s)

	began := time.Now()
	upid := c.ok("POST", "nodes/pve1/qemu", form("vmid", "100")).data().(string)

	if d := time.Since(began); d > 200*time.Millisecond {
		t.Fatalf("the create call itself took %s", d)
	}

	if st := c.ok("GET", "nodes/pve1/tasks/"+upid+"/status", nil).dataMap(t); st["status"] != "running" {
		t.Fatalf("status = %v", st)
	}

	if r := c.do("GET", "nodes/pve1/qemu/100/config", nil); r.Code != 500 {
		t.Fatal("config exists while the create task runs")
	}

	if r := c.do("POST", "nodes/pve1/qemu", form("vmid", "100")); r.Reason != "VM 100 already exists on node 'pve1'" {
		t.Fatalf("second create during the first: %q", r.Reason)
	}

	if exit := c.waitTask("pve1", upid); exit != "OK" || time.Since(began) < 300*time.Millisecond {
		t.Fatalf("exit %q after %s", exit, time.Since(began))
	}

	s.SetLatency(150 * time.Millisecond)
	s.SetRouteLatency("POST /nodes/{node}/qemu", -1)

	began = time.Now()
	c.ok("GET", "version", nil)

	if d := time.Since(began); d < 150*time.Millisecond {
		t.Fatalf("GET /version took %s with 150ms latency", d)
	}
}

func TestFailNextTaskAndTaskDeletion(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	c := newClient(t, s)
	c.waitTask("pve1", c.ok("POST", "nodes/pve1/qemu", form("vmid", "100")).data().(string))

	s.FailNextTask("POST /nodes/{node}/qemu/{vmid}/status/start", "start failed: QEMU exited with code 1")

	upid := c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string)
	if exit := c.waitTask("pve1", upid); exit != "start failed: QEMU exited with code 1" {
		t.Fatalf("exit = %q", exit)
	}

	log := c.ok("GET", "nodes/pve1/tasks/"+upid+"/log", nil).dataList(t)
	if last := log[len(log)-1].(map[string]any)["t"]; last != "TASK ERROR: start failed: QEMU exited with code 1" {
		t.Fatalf("last log line = %v", last)
	}

	if v, _ := s.VM(100); v.Running {
		t.Fatal("a failed start task started the VM")
	}

	s.SetRouteLatency("POST /nodes/{node}/qemu/{vmid}/status/start", time.Hour)
	upid = c.ok("POST", "nodes/pve1/qemu/100/status/start", nil).data().(string)
	c.ok("DELETE", "nodes/pve1/tasks/"+upid, nil)

	if exit := c.waitTask("pve1", upid); exit != "interrupted by signal" {
		t.Fatalf("stopped task: %q", exit)
	}
}

func TestConcurrentCallsAreSafe(t *testing.T) {
	t.Parallel()

	s := start(t, Options{Nodes: []string{"pve1", "pve2"}, Logf: func(string, ...any) {}})
	c := newClient(t, s)

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)

		go func() {
			defer wg.Done()

			node := []string{"pve1", "pve2"}[i%2]
			id := fmt.Sprint(100 + i)
			c.waitTask(node, c.ok("POST", "nodes/"+node+"/qemu", form("vmid", id, "scsi0", "local-lvm:1")).data().(string))
			c.waitTask(node, c.ok("POST", "nodes/"+node+"/qemu/"+id+"/status/start", nil).data().(string))
			c.ok("GET", "cluster/resources", form("type", "vm"))
		}()
	}

	wg.Wait()

	if n := len(s.VMs()); n != 20 {
		t.Fatalf("%d VMs", n)
	}
}

func TestFailureRateIsPerRouteWhateverTheInterleaving(t *testing.T) {
	t.Parallel()

	// pattern returns the codes of 30 GET /version calls, interleaved with `others` calls of
	// another route after each one.
	pattern := func(others int) string {
		s := start(t, Options{Logf: func(string, ...any) {}})
		s.SetFailureRate(0.3, 11)
		c := newClient(t, s)

		var b strings.Builder
		for range 30 {
			fmt.Fprintf(&b, "%d,", c.do("GET", "version", nil).Code)

			for range others {
				c.do("GET", "nodes", nil)
			}
		}

		return b.String()
	}

	a, b := pattern(0), pattern(3)
	if a != b {
		t.Fatalf("calls of another route shifted the failures:\n%s\n%s", a, b)
	}

	if !strings.Contains(a, "200") || (!strings.Contains(a, "500") && !strings.Contains(a, "503")) {
		t.Fatalf("pattern = %s", a)
	}
}

func TestInjectedFailuresAndTaskStatusFailures(t *testing.T) {
	t.Parallel()

	s := start(t, Options{})
	c := newClient(t, s)
	s.FailNextTaskStatus("qmcreate", 1)

	upid := c.ok("POST", "nodes/pve1/qemu", form("vmid", "100")).data().(string)

	if r := c.do("GET", "nodes/pve1/tasks/"+upid+"/status", nil); r.Code != 500 && r.Code != 503 {
		t.Fatalf("status read of the finished create task: %d %q", r.Code, r.Reason)
	}

	if _, ok := s.VM(100); !ok {
		t.Fatal("the failed status read undid the create")
	}

	if exit := c.waitTask("pve1", upid); exit != "OK" {
		t.Fatalf("the next status read says %q", exit)
	}

	s.FailNext("GET /version", 2)
	c.do("GET", "version", nil)
	c.do("GET", "version", nil)
	c.ok("GET", "version", nil)

	want := map[string]int{"GET /nodes/{node}/tasks/{upid}/status": 1, "GET /version": 2}
	if got := s.InjectedFailures(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("injected failures %v, want %v", got, want)
	}
}
