package pvefake

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// pool is a resource pool.
type pool struct {
	id      string
	comment string
	members []int
}

// getVersion serves GET /version.
func (s *Server) getVersion(*call) (any, *apiError) {
	parts := strings.SplitN(s.opts.Version, ".", 3)
	release := parts[0]

	if len(parts) > 1 {
		release += "." + parts[1]
	}

	return map[string]any{"version": s.opts.Version, "release": release, "repoid": "c1a2b3d4e5f60718"}, nil
}

// getNextID serves GET /cluster/nextid: the lowest free id from FirstVMID, or a check of the
// proposed vmid (400 "VM <id> already exists" when taken).
func (s *Server) getNextID(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if v, ok := c.param("vmid"); ok {
		id, err := strconv.Atoi(v)
		if err != nil || id < 100 || id > 999999999 {
			return nil, paramErr1("vmid", "invalid format - value does not look like a valid VM ID")
		}

		if s.vms[id] != nil {
			return nil, paramErr1("vmid", fmt.Sprintf("VM %d already exists", id))
		}

		return strconv.Itoa(id), nil
	}

	for id := s.opts.FirstVMID; ; id++ {
		if s.vms[id] == nil {
			return strconv.Itoa(id), nil
		}
	}
}

// listNodes serves GET /nodes.
func (s *Server) listNodes(*call) (any, *apiError) {
	out := []map[string]any{}

	for _, n := range s.nodes {
		out = append(out, map[string]any{
			"node": n, "id": "node/" + n, "type": "node", "status": "online", "level": "",
			"maxcpu": 16, "cpu": 0.02, "maxmem": int64(64) << 30, "mem": int64(4) << 30,
			"maxdisk": int64(100) << 30, "disk": int64(10) << 30, "uptime": 86400,
			"ssl_fingerprint": "00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF",
		})
	}

	return out, nil
}

// getClusterStatus serves GET /cluster/status as pve-manager's API2/Cluster.pm get_status
// answers it (permission: Sys.Audit on /, from the schema): in a cluster, a "cluster" entry
// (corosync's name, node count, config version and quorum) and one "node" entry per member,
// sorted by name, nodeid being the corosync id; on a standalone host only the host itself with
// nodeid 0. The first node is the one answering ("local": 1). The config version counts one for
// pvecm create and one per node that joined.
func (s *Server) getClusterStatus(*call) (any, *apiError) {
	nodes := slices.Sorted(slices.Values(s.nodes))
	out := []map[string]any{}

	if s.opts.ClusterName != "" {
		out = append(out, map[string]any{
			"type": "cluster", "id": "cluster", "name": s.opts.ClusterName,
			"nodes": len(nodes), "quorate": 1, "version": len(nodes),
		})
	}

	for _, n := range nodes {
		nodeid := 0
		if s.opts.ClusterName != "" {
			nodeid = slices.Index(s.nodes, n) + 1
		}

		out = append(out, map[string]any{
			"type": "node", "id": "node/" + n, "name": n, "ip": s.opts.NodeIPs[n],
			"local": boolInt(n == s.nodes[0]), "nodeid": nodeid, "online": 1, "level": "",
		})
	}

	return out, nil
}

// getClusterResources serves GET /cluster/resources (type: vm, storage, node; or all).
func (s *Server) getClusterResources(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	typ, filtered := c.param("type")
	if filtered && !slices.Contains([]string{"vm", "storage", "node", "sdn", "pool"}, typ) {
		return nil, paramErr1("type", "value '"+typ+"' does not have a value in the enumeration 'vm, storage, node, sdn'")
	}

	out := []map[string]any{}

	if !filtered || typ == "vm" {
		for _, v := range s.sortedVMs() {
			if !s.can(c.user, fmt.Sprintf("/vms/%d", v.id), false, "VM.Audit") {
				continue
			}

			e := s.vmStatus(v)
			e["id"] = fmt.Sprintf("qemu/%d", v.id)
			e["type"] = "qemu"
			e["node"] = v.node
			e["maxcpu"] = e["cpus"]
			e["template"] = boolInt(v.config["template"] == "1")
			if tags := v.config["tags"]; tags != "" {
				e["tags"] = tags // PVE 7.3+ lists a guest's tags, ';'-separated as stored
			}
			// extract_vm_stats (pve-manager's API2Tools) has no pid and running-qemu: those are
			// status/current's
			delete(e, "cpus")
			delete(e, "qmpstatus")
			delete(e, "pid")
			delete(e, "running-qemu")

			if p := s.poolOf(v.id); p != "" && s.can(c.user, "/pool/"+p, false, "Pool.Audit") {
				e["pool"] = p
			}

			out = append(out, e)
		}
	}

	if !filtered || typ == "node" {
		nodes, _ := s.listNodes(c)
		for _, e := range nodes.([]map[string]any) {
			delete(e, "ssl_fingerprint") // only GET /nodes adds it (pve-manager's API2/Nodes.pm)
			out = append(out, e)
		}
	}

	if !filtered || typ == "storage" {
		for _, n := range s.nodes {
			for _, st := range s.storagesOn(n) {
				if !s.can(c.user, "/storage/"+st.cfg.ID, false, "Datastore.Audit") {
					continue
				}

				out = append(out, map[string]any{
					"id": "storage/" + n + "/" + st.cfg.ID, "type": "storage", "storage": st.cfg.ID, "node": n,
					"status": "available", "plugintype": st.cfg.Type, "content": strings.Join(st.cfg.Content, ","),
					"shared": boolInt(st.shared), "disk": st.used(), "maxdisk": st.cfg.TotalBytes,
				})
			}
		}
	}

	return out, nil
}

func (s *Server) poolOf(vmid int) string {
	for _, p := range s.sortedPools() {
		if slices.Contains(p.members, vmid) {
			return p.id
		}
	}

	return ""
}

func (s *Server) sortedPools() []*pool {
	out := make([]*pool, 0, len(s.pools))
	for _, p := range s.pools {
		out = append(out, p)
	}

	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })

	return out
}

func (s *Server) poolMembers(p *pool) []map[string]any {
	members := []map[string]any{}

	for _, id := range p.members {
		v := s.vms[id]
		if v == nil || v.creating {
			continue
		}

		e := s.vmStatus(v)
		e["id"] = fmt.Sprintf("qemu/%d", id)
		e["type"] = "qemu"
		e["node"] = v.node
		members = append(members, e)
	}

	sort.Slice(members, func(i, j int) bool { return members[i]["id"].(string) < members[j]["id"].(string) })

	return members
}

// listPools serves GET /pools, and with ?poolid= the one pool with its members (PVE 8's form).
func (s *Server) listPools(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if id, ok := c.param("poolid"); ok {
		p := s.pools[id]
		if p == nil {
			return nil, errf("pool '%s' does not exist", id)
		}

		return []map[string]any{{"poolid": p.id, "comment": p.comment, "members": s.poolMembers(p)}}, nil
	}

	out := []map[string]any{}
	for _, p := range s.sortedPools() {
		if !s.can(c.user, "/pool/"+p.id, false, "Pool.Audit") {
			continue
		}

		out = append(out, map[string]any{"poolid": p.id, "comment": p.comment})
	}

	return out, nil
}

// getPoolLegacy serves GET /pools/{poolid} (the form before PVE 8.1).
func (s *Server) getPoolLegacy(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	p := s.pools[c.vars["poolid"]]
	if p == nil {
		return nil, errf("pool '%s' does not exist", c.vars["poolid"])
	}

	return map[string]any{"comment": p.comment, "members": s.poolMembers(p)}, nil
}

// listMappings serves GET /cluster/mapping/{type} (pci, usb, dir): the PCI mappings of
// Options.PCIMappings, each with one entry per node; with check-node, an empty list of checks.
// usb and dir hold none.
func (s *Server) listMappings(c *call) (any, *apiError) {
	typ := c.vars["type"]
	if !slices.Contains([]string{"pci", "usb", "dir"}, typ) {
		return nil, errf("Method 'GET /cluster/mapping/%s' not implemented", typ)
	}

	out := []map[string]any{}
	if typ != "pci" {
		return out, nil
	}

	_, check := c.param("check-node")

	s.mu.Lock()
	defer s.mu.Unlock()

	for i, id := range s.opts.PCIMappings {
		// pve-manager's Cluster/Mapping/PCI.pm index lists only the mappings the caller may
		// audit, use or modify
		if !s.can(c.user, "/mapping/pci/"+id, true, "Mapping.Modify", "Mapping.Use", "Mapping.Audit") {
			continue
		}

		var entries []string
		for _, n := range s.nodes {
			entries = append(entries, fmt.Sprintf("id=10de:2204,iommugroup=%d,node=%s,path=0000:0%d:00.0", 10+i, n, i+1))
		}

		m := map[string]any{"id": id, "type": "pci", "description": "", "map": entries}
		if check {
			m["checks"] = []any{}
		}

		out = append(out, m)
	}

	return out, nil
}
