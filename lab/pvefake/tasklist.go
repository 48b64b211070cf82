package pvefake

import (
	"sort"
	"strconv"
	"strings"
)

// listTasks serves GET /nodes/{node}/tasks as PVE 8 does (PVE::API2::Tasks): finished tasks
// ("archive", the default source), running ones ("active") or both ("all"), newest first, from
// start, at most limit (default 50), filtered by vmid (the task's id), typefilter (its type,
// e.g. "qmstart"), userfilter, errors (only failed ones) and since/until (start time, epoch).
// A finished task's status is its exit status ("OK" or the error); a running one has none.
func (s *Server) listTasks(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	source := "archive"
	if v, ok := c.param("source"); ok {
		if v != "archive" && v != "active" && v != "all" {
			return nil, paramErr1("source", "value '"+v+"' does not have a value in the enumeration 'archive, active, all'")
		}

		source = v
	}

	start, limit := 0, 50
	for name, into := range map[string]*int{"start": &start, "limit": &limit} {
		if v, ok := c.param(name); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, paramErr1(name, "value must have a minimum value of 0")
			}

			*into = n
		}
	}

	onlyErrors, e := c.boolParam("errors", false)
	if e != nil {
		return nil, e
	}

	vmid, _ := c.param("vmid")
	typ, _ := c.param("typefilter")
	user, _ := c.param("userfilter")
	since, _ := c.param("since")
	until, _ := c.param("until")

	var picked []*task

	auditor := s.can(c.user, "/nodes/"+c.vars["node"], false, "Sys.Audit")

	for _, t := range s.tasks {
		switch {
		case !auditor && !ownsTask(t, c.user):
			continue
		case t.node != c.vars["node"],
			source == "archive" && t.running,
			source == "active" && !t.running,
			vmid != "" && t.id != vmid,
			typ != "" && t.typ != typ,
			user != "" && !strings.Contains(t.user, user),
			onlyErrors && (t.running || t.exit == "OK"),
			since != "" && t.start.Unix() < atoi64(since),
			until != "" && t.start.Unix() > atoi64(until):
			continue
		}

		picked = append(picked, t)
	}

	sort.Slice(picked, func(i, j int) bool { return picked[i].pid > picked[j].pid })

	out := []map[string]any{}

	for i, t := range picked {
		if i < start || len(out) >= limit {
			continue
		}

		user, _, _ := strings.Cut(t.user, "!")
		e := map[string]any{
			"upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pstart, "starttime": t.start.Unix(),
			"type": t.typ, "id": t.id, "user": user,
		}

		if !t.running {
			e["status"] = t.exit
			e["endtime"] = t.start.Unix()
		}

		out = append(out, e)
	}

	return out, nil
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
