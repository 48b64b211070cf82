package pvefake

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// handler serves one route. It returns the value of "data" or an error.
type handler func(c *call) (any, *apiError)

// route is one API method. Its key, "METHOD /pattern" (e.g. "POST /nodes/{node}/qemu"), names
// it in call counts and fault rules.
type route struct {
	method  string
	pattern string
	segs    []string
	// params lists the accepted parameters besides the path variables; nil means the handler
	// checks them itself.
	params []string
	// task marks methods that answer a task id: their latency is the task's running time.
	task   bool
	noAuth bool
	h      handler
}

func (r route) key() string { return r.method + " " + r.pattern }

func newRoute(method, pattern string, h handler, params ...string) route {
	return route{method: method, pattern: pattern, segs: splitPath(pattern), params: params, h: h}
}

func (r route) startsTask() route { r.task = true; return r }

func (r route) checksParams() route { r.params = nil; return r }

func (r route) public() route { r.noAuth = true; return r }

// call is one request being served.
type call struct {
	s      *Server
	r      *http.Request
	route  string
	vars   map[string]string
	params url.Values
	user   string
	// delay is the running time of the task this call starts (task routes only).
	delay time.Duration
}

func (c *call) param(name string) (string, bool) {
	v, ok := c.params[name]
	if !ok || len(v) == 0 {
		return "", false
	}

	return v[len(v)-1], true
}

func (c *call) boolParam(name string, def bool) (bool, *apiError) {
	v, ok := c.param(name)
	if !ok {
		return def, nil
	}

	b, ok := parseBool(v)
	if !ok {
		return false, paramErr1(name, "type check ('boolean') failed - got '"+v+"'")
	}

	return b, nil
}

// node checks that the path's node exists, as PVE's proxyto does.
func (c *call) node() (string, *apiError) {
	n := c.vars["node"]
	if slices.Contains(c.s.nodes, n) {
		return n, nil
	}

	return "", errf("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known", n, n)
}

func (c *call) vmid() (int, *apiError) {
	v := c.vars["vmid"]

	id, err := strconv.Atoi(v)
	if err != nil || id < 100 || id > 999999999 {
		return 0, paramErr1("vmid", "invalid format - value does not look like a valid VM ID")
	}

	return id, nil
}

func splitPath(p string) []string {
	var segs []string

	for _, s := range strings.Split(p, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}

	return segs
}

// match finds the route for method and the unescaped path segments.
func (s *Server) match(method string, segs []string) (*route, map[string]string) {
	for i := range s.routes {
		rt := &s.routes[i]
		if rt.method != method || len(rt.segs) != len(segs) {
			continue
		}

		vars := map[string]string{}
		ok := true

		for j, p := range rt.segs {
			if strings.HasPrefix(p, "{") {
				vars[strings.Trim(p, "{}")] = segs[j]
			} else if p != segs[j] {
				ok = false
				break
			}
		}

		if ok {
			return rt, vars
		}
	}

	return nil, nil
}

// ServeHTTP serves PVE's JSON API under /api2/json/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	escaped := r.URL.EscapedPath()
	rel := strings.TrimPrefix(escaped, "/api2/json")

	var segs []string

	for _, seg := range splitPath(rel) {
		u, err := url.PathUnescape(seg)
		if err != nil {
			u = seg
		}

		segs = append(segs, u)
	}

	display := "/" + strings.Join(segs, "/")

	var rt *route
	var vars map[string]string

	if strings.HasPrefix(escaped, "/api2/json/") {
		rt, vars = s.match(r.Method, segs)
	}

	if rt == nil {
		s.countCall("UNKNOWN " + r.Method + " " + display)
		s.opts.Logf("pvefake: %s %s -> 501 (route not implemented by the fake)", r.Method, display)
		writeError(w, &apiError{Code: http.StatusNotImplemented,
			Message: "Method '" + r.Method + " " + display + "' not implemented"})

		return
	}

	key := rt.key()
	s.countCall(key)

	data, e := s.serve(r, rt, vars)

	if s.schema != nil && (e == nil || e.Code != http.StatusUnauthorized) {
		code := http.StatusOK
		if e != nil {
			code = e.Code
		}

		_ = r.ParseForm()
		s.schema.checkRequest(r, escaped, code)

		if e == nil {
			s.schema.checkResponse(r.Method, escaped, data)
		}
	}

	if e != nil {
		s.opts.Logf("pvefake: %s %s -> %d %s", r.Method, display, e.Code, strings.TrimSpace(e.Message))

		if e.Code == http.StatusForbidden {
			s.mu.Lock()
			s.denied = append(s.denied, r.Method+" "+display+": "+strings.TrimSpace(e.Message))
			s.mu.Unlock()
		}

		writeError(w, e)

		return
	}

	s.opts.Logf("pvefake: %s %s -> 200", r.Method, display)
	writeData(w, data)
}

func (s *Server) serve(r *http.Request, rt *route, vars map[string]string) (any, *apiError) {
	if err := r.ParseForm(); err != nil {
		return nil, &apiError{Code: http.StatusBadRequest, Message: "unable to parse parameters - " + err.Error()}
	}

	c := &call{s: s, r: r, route: rt.key(), vars: vars, params: r.Form}

	if !rt.noAuth {
		user, e := s.authenticate(r)
		if e != nil {
			return nil, e
		}

		c.user = user

		s.mu.Lock()
		e = s.checkAPIPermissions(c, r.Method, r.URL.EscapedPath(), "/"+strings.Join(splitPath(c.r.URL.Path), "/"))
		s.mu.Unlock()

		if e != nil {
			return nil, e
		}
	}

	if rt.params != nil {
		if e := checkParams(c.params, rt.params, vars); e != nil {
			return nil, e
		}
	}

	delay := s.faults.latencyFor(c.route)
	if rt.task {
		c.delay = delay
	} else if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return nil, errf("client disconnected")
		}
	}

	if e := s.faults.failure(c.route); e != nil {
		return nil, e
	}

	return rt.h(c)
}

// checkParams rejects parameters outside the method's schema, as PVE does
// (additionalProperties => 0).
func checkParams(params url.Values, allowed []string, vars map[string]string) *apiError {
	errs := map[string]string{}

	for name := range params {
		if _, ok := vars[name]; ok || slices.Contains(allowed, name) {
			continue
		}

		errs[name] = "property is not defined in schema and the schema does not allow additional properties"
	}

	if len(errs) > 0 {
		return paramErr(errs)
	}

	return nil
}

func (s *Server) countCall(key string) {
	s.mu.Lock()
	s.calls[key]++
	s.mu.Unlock()
}

// routeTable lists every method the fake serves.
func (s *Server) routeTable() []route {
	return []route{
		newRoute("POST", "/access/ticket", s.createTicket, "username", "password", "realm", "otp", "tfa-challenge", "new-format").public(),
		newRoute("GET", "/version", s.getVersion),
		newRoute("GET", "/access/users", s.listUsers, "enabled", "full"),
		newRoute("POST", "/access/users", s.createUser, "userid", "password", "comment", "email", "enable", "expire",
			"firstname", "lastname", "groups", "keys"),
		newRoute("GET", "/access/users/{userid}", s.getUser),
		newRoute("PUT", "/access/users/{userid}", s.updateUser, "append", "comment", "email", "enable", "expire",
			"firstname", "lastname", "groups", "keys"),
		newRoute("DELETE", "/access/users/{userid}", s.deleteUser),
		newRoute("POST", "/access/users/{userid}/token/{tokenid}", s.createToken, "comment", "expire", "privsep"),
		newRoute("GET", "/access/users/{userid}/token/{tokenid}", s.getToken),
		newRoute("DELETE", "/access/users/{userid}/token/{tokenid}", s.deleteToken),
		newRoute("GET", "/access/roles", s.listRoles),
		newRoute("POST", "/access/roles", s.createRole, "roleid", "privs"),
		newRoute("GET", "/access/roles/{roleid}", s.getRole),
		newRoute("PUT", "/access/roles/{roleid}", s.updateRole, "privs", "append"),
		newRoute("DELETE", "/access/roles/{roleid}", s.deleteRole),
		newRoute("GET", "/access/acl", s.readACL),
		newRoute("PUT", "/access/acl", s.updateACL, "path", "roles", "users", "groups", "tokens", "delete", "propagate"),
		newRoute("GET", "/access/permissions", s.getPermissions, "path", "userid"),
		newRoute("GET", "/cluster/nextid", s.getNextID, "vmid"),
		newRoute("GET", "/cluster/resources", s.getClusterResources, "type"),
		newRoute("GET", "/cluster/status", s.getClusterStatus),
		newRoute("GET", "/pools", s.listPools, "poolid", "type"),
		newRoute("GET", "/pools/{poolid}", s.getPoolLegacy, "type"),
		newRoute("GET", "/storage", s.listStorageConfig, "type"),
		newRoute("GET", "/nodes", s.listNodes),
		newRoute("GET", "/cluster/mapping/{type}", s.listMappings, "check-node"),
		newRoute("GET", "/nodes/{node}/storage", s.listNodeStorages, "content", "enabled", "format", "storage", "target"),
		newRoute("GET", "/nodes/{node}/storage/{storage}/status", s.getStorageStatus),
		newRoute("GET", "/nodes/{node}/query-url-metadata", s.queryURLMetadata, "url", "verify-certificates"),
		newRoute("POST", "/nodes/{node}/storage/{storage}/download-url", s.downloadURL,
			"url", "content", "filename", "checksum", "checksum-algorithm", "compression", "verify-certificates").startsTask(),
		newRoute("GET", "/nodes/{node}/storage/{storage}/content", s.listContent, "content", "vmid"),
		newRoute("POST", "/nodes/{node}/storage/{storage}/content", s.allocContent, "filename", "size", "vmid", "format"),
		newRoute("GET", "/nodes/{node}/storage/{storage}/content/{volume}", s.getContent),
		newRoute("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}", s.deleteContent, "delay").startsTask(),
		newRoute("GET", "/nodes/{node}/tasks", s.listTasks, "start", "limit", "vmid", "typefilter", "userfilter",
			"statusfilter", "errors", "source", "since", "until"),
		newRoute("GET", "/nodes/{node}/tasks/{upid}/status", s.getTaskStatus),
		newRoute("GET", "/nodes/{node}/tasks/{upid}/log", s.getTaskLog, "start", "limit", "download"),
		newRoute("DELETE", "/nodes/{node}/tasks/{upid}", s.deleteTask),
		newRoute("GET", "/nodes/{node}/qemu", s.listVMs, "full"),
		newRoute("POST", "/nodes/{node}/qemu", s.createVM).checksParams().startsTask(),
		newRoute("DELETE", "/nodes/{node}/qemu/{vmid}", s.deleteVM, "purge", "destroy-unreferenced-disks", "skiplock").startsTask(),
		newRoute("GET", "/nodes/{node}/qemu/{vmid}/config", s.getVMConfig, "current", "snapshot"),
		newRoute("PUT", "/nodes/{node}/qemu/{vmid}/config", s.updateVMConfigSync).checksParams(),
		newRoute("POST", "/nodes/{node}/qemu/{vmid}/config", s.updateVMConfigAsync).checksParams().startsTask(),
		newRoute("PUT", "/nodes/{node}/qemu/{vmid}/resize", s.resizeVMDisk, "disk", "size", "digest", "skiplock").startsTask(),
		newRoute("PUT", "/nodes/{node}/qemu/{vmid}/cloudinit", s.regenerateCloudInit),
		newRoute("GET", "/nodes/{node}/qemu/{vmid}/status/current", s.getVMStatus),
		newRoute("POST", "/nodes/{node}/qemu/{vmid}/status/start", s.startVM,
			"timeout", "skiplock", "machine", "force-cpu", "migratedfrom", "migration_network", "migration_type", "stateuri", "targetstorage").startsTask(),
		newRoute("POST", "/nodes/{node}/qemu/{vmid}/status/stop", s.stopVM,
			"timeout", "skiplock", "keepActive", "migratedfrom", "overrule-shutdown").startsTask(),
		newRoute("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown", s.shutdownVM,
			"timeout", "forceStop", "keepActive", "skiplock").startsTask(),
		newRoute("POST", "/nodes/{node}/qemu/{vmid}/status/reboot", s.rebootVM, "timeout").startsTask(),
		newRoute("GET", "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces", s.agentNetworkInterfaces),
		newRoute("POST", "/nodes/{node}/qemu/{vmid}/agent/ping", s.agentPing),
	}
}

// Routes lists the route keys the fake serves, e.g. "POST /nodes/{node}/qemu".
func (s *Server) Routes() []string {
	keys := make([]string, 0, len(s.routes))
	for _, r := range s.routes {
		keys = append(keys, r.key())
	}

	return keys
}
