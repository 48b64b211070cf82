package pvefake

import (
	"slices"
	"strings"
)

// storageStatus is an item of GET /nodes/{node}/storage and the answer of …/status.
func storageStatus(st *storage) map[string]any {
	used := st.used()

	return map[string]any{
		"storage":       st.cfg.ID,
		"type":          st.cfg.Type,
		"content":       strings.Join(st.cfg.Content, ","),
		"active":        1,
		"enabled":       1,
		"shared":        boolInt(st.shared),
		"total":         st.cfg.TotalBytes,
		"used":          used,
		"avail":         st.cfg.TotalBytes - used,
		"used_fraction": float64(used) / float64(st.cfg.TotalBytes),
	}
}

// listNodeStorages serves GET /nodes/{node}/storage.
func (s *Server) listNodeStorages(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	node, e := c.node()
	if e != nil {
		return nil, e
	}

	content, byContent := c.param("content")
	only, byID := c.param("storage")
	out := []map[string]any{}

	for _, st := range s.storagesOn(node) {
		if !s.can(c.user, "/storage/"+st.cfg.ID, true, "Datastore.Audit", "Datastore.AllocateSpace") {
			continue
		}

		if byID && st.cfg.ID != only {
			continue
		}

		if byContent && !slices.ContainsFunc(strings.Split(content, ","), st.supports) {
			continue
		}

		out = append(out, storageStatus(st))
	}

	if byID && len(out) == 0 {
		return nil, paramErr1("storage", "No such storage.")
	}

	return out, nil
}

// getStorageStatus serves GET /nodes/{node}/storage/{storage}/status.
func (s *Server) getStorageStatus(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if _, e := c.node(); e != nil {
		return nil, e
	}

	st := s.storageOn(c.vars["node"], c.vars["storage"])
	if st == nil {
		return nil, paramErr1("storage", "No such storage.")
	}

	res := storageStatus(st)
	delete(res, "storage")

	return res, nil
}

// listStorageConfig serves GET /storage (the cluster's storage.cfg).
func (s *Server) listStorageConfig(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	typ, byType := c.param("type")
	seen := map[string]bool{}
	out := []map[string]any{}

	for _, st := range s.storagesOn(s.nodes[0]) {
		if seen[st.cfg.ID] || (byType && st.cfg.Type != typ) {
			continue
		}

		seen[st.cfg.ID] = true
		e := map[string]any{"storage": st.cfg.ID, "type": st.cfg.Type, "content": strings.Join(st.cfg.Content, ",")}

		if st.fileBased {
			e["path"] = st.cfg.Path
		}

		if st.shared {
			e["shared"] = 1
		}

		out = append(out, e)
	}

	return out, nil
}
