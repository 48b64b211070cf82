package pvefake

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// task is a PVE worker task ("UPID:…").
type task struct {
	upid    string
	node    string
	typ     string
	id      string
	user    string
	pid     int
	pstart  int
	start   time.Time
	running bool
	exit    string
	log     []string
	timer   *time.Timer
	cleanup func() // undoes the handler's reservation when the work never runs
}

// taskRun is handed to a task's work function.
type taskRun struct {
	s     *Server
	t     *task
	lines []string
	// awaits are events the task only finishes after: on Proxmox VE a stop or destroy task ends
	// when the QEMU process is gone, so its guest no longer answers on the network. Delivering
	// those events after the task had finished let a stopped VM's emulated node keep answering
	// for a moment, long enough for a replacement's configuration to reach the old node.
	awaits []<-chan struct{}
}

// await makes the task finish only once the event's handler has returned.
func (r *taskRun) await(handled <-chan struct{}) {
	r.awaits = append(r.awaits, handled)
}

// logf adds a line to the task log.
func (r *taskRun) logf(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// TaskInfo describes a task for inspection.
type TaskInfo struct {
	UPID       string
	Node       string
	Type       string
	ID         string
	User       string
	Running    bool
	ExitStatus string
	Log        []string
}

// encodeText is PVE::Tools::encode_text, used for worker ids: control and high characters,
// ':' and '\' become \xHH.
func encodeText(s string) string {
	var b strings.Builder

	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c == ':' || c == '\\' || c >= 0x7f {
			fmt.Fprintf(&b, "\\x%02x", c)
			continue
		}

		b.WriteByte(c)
	}

	return b.String()
}

// startTask registers a worker task and runs work: at once when the call has no latency (the
// task is finished before the UPID is returned, so bpg's first status poll sees it stopped),
// else after the call's latency, during which the task is "running". work runs without s.mu
// held and takes the lock itself; cleanup (may be nil) runs under s.mu when the work is
// skipped (injected task error, task stopped, server closed).
func (s *Server) startTask(c *call, node, typ, id string, work func(r *taskRun) error, cleanup func()) string {
	injected, inject := s.faults.taskError(c.route)

	s.mu.Lock()
	s.taskPID++
	now := time.Now()
	t := &task{
		node:    node,
		typ:     typ,
		id:      id,
		user:    c.user,
		pid:     s.taskPID,
		pstart:  0x1c7d000 + s.taskPID*3,
		start:   now,
		running: true,
		cleanup: cleanup,
	}
	t.upid = fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", node, t.pid, t.pstart, now.Unix(), typ, id, c.user)
	s.tasks[t.upid] = t
	s.mu.Unlock()

	s.opts.Logf("pvefake: task %s started (%s)", t.upid, c.delay)

	run := func() {
		r := &taskRun{s: s, t: t}

		var err error
		if inject {
			s.mu.Lock()
			if t.cleanup != nil {
				t.cleanup()
			}
			s.mu.Unlock()

			err = fmt.Errorf("%s", injected)
		} else {
			err = work(r)
		}

		// Outside s.mu: a handler may call back into the server.
		for _, handled := range r.awaits {
			<-handled
		}

		s.finishTask(t, r.lines, err)
	}

	if c.delay <= 0 {
		run()
		return t.upid
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.finishTask(t, nil, fmt.Errorf("received interrupt"))

		return t.upid
	}

	s.wg.Add(1)
	t.timer = time.AfterFunc(c.delay, func() {
		defer s.wg.Done()
		run()
	})
	s.mu.Unlock()

	return t.upid
}

func (s *Server) finishTask(t *task, lines []string, err error) {
	s.mu.Lock()
	t.log = append(t.log, lines...)
	t.running = false

	if err != nil {
		msg := strings.TrimRight(err.Error(), "\n")
		t.exit = msg
		t.log = append(t.log, "TASK ERROR: "+msg)
	} else {
		t.exit = "OK"
		t.log = append(t.log, "TASK OK")
	}
	s.mu.Unlock()

	s.opts.Logf("pvefake: task %s finished: %s", t.upid, t.exit)
}

func (s *Server) lookupTask(c *call) (*task, *apiError) {
	upid := c.vars["upid"]

	t, ok := s.tasks[upid]
	if !ok || t.node != c.vars["node"] {
		if !strings.HasPrefix(upid, "UPID:") || strings.Count(upid, ":") < 8 {
			return nil, paramErr1("upid", "unable to parse worker upid '"+upid+"'")
		}

		return nil, paramErr1("upid", "no such task")
	}

	return t, nil
}

// getTaskStatus serves GET /nodes/{node}/tasks/{upid}/status.
func (s *Server) getTaskStatus(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	t, e := s.lookupTask(c)
	if e != nil {
		return nil, e
	}

	if !ownsTask(t, c.user) {
		if e := s.check(c.user, "/nodes/"+t.node, "Sys.Audit"); e != nil {
			return nil, e
		}
	}

	if !t.running {
		if e := s.faults.statusFailure(c.route, t.typ); e != nil {
			return nil, e
		}
	}

	user, token, _ := strings.Cut(t.user, "!")
	res := map[string]any{
		"upid":      t.upid,
		"node":      t.node,
		"pid":       t.pid,
		"pstart":    t.pstart,
		"starttime": t.start.Unix(),
		"type":      t.typ,
		"id":        t.id,
		"user":      user,
		"status":    "running",
	}

	if token != "" {
		res["tokenid"] = token
	}

	if !t.running {
		res["status"] = "stopped"
		res["exitstatus"] = t.exit
	}

	return res, nil
}

// getTaskLog serves GET /nodes/{node}/tasks/{upid}/log (start, limit: default 0, 50).
func (s *Server) getTaskLog(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	t, e := s.lookupTask(c)
	if e != nil {
		return nil, e
	}

	if !ownsTask(t, c.user) {
		if e := s.check(c.user, "/nodes/"+t.node, "Sys.Audit"); e != nil {
			return nil, e
		}
	}

	start, limit := 0, 50
	if v, ok := c.param("start"); ok {
		start, _ = strconv.Atoi(v)
	}

	if v, ok := c.param("limit"); ok {
		limit, _ = strconv.Atoi(v)
	}

	lines := []map[string]any{}

	for i, l := range t.log {
		if i >= start && len(lines) < limit {
			lines = append(lines, map[string]any{"n": i + 1, "t": l})
		}
	}

	return lines, nil
}

// deleteTask serves DELETE /nodes/{node}/tasks/{upid}: stops a running task.
func (s *Server) deleteTask(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	t, e := s.lookupTask(c)
	if e != nil {
		return nil, e
	}

	if !ownsTask(t, c.user) {
		if e := s.check(c.user, "/nodes/"+t.node, "Sys.Modify"); e != nil {
			return nil, e
		}
	}

	if t.running && t.timer != nil && t.timer.Stop() {
		s.wg.Done()

		if t.cleanup != nil {
			t.cleanup()
		}

		t.running = false
		t.exit = "interrupted by signal"
		t.log = append(t.log, "received interrupt", "TASK ERROR: interrupted by signal")
	}

	return nil, nil
}

// Tasks lists all tasks, oldest first.
func (s *Server) Tasks() []TaskInfo {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := make([]TaskInfo, 0, len(s.tasks))
	for _, t := range s.tasks {
		out = append(out, TaskInfo{
			UPID: t.upid, Node: t.node, Type: t.typ, ID: t.id, User: t.user,
			Running: t.running, ExitStatus: t.exit, Log: append([]string(nil), t.log...),
		})
	}

	sort.Slice(out, func(i, j int) bool { return taskPID(out[i].UPID) < taskPID(out[j].UPID) })

	return out
}

func taskPID(upid string) int64 {
	parts := strings.Split(upid, ":")
	if len(parts) < 3 {
		return 0
	}

	pid, _ := strconv.ParseInt(parts[2], 16, 64)

	return pid
}
