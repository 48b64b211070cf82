package pvefake

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// storagePlugins tells which storage types keep volumes as files (downloads allowed, image
// volumes named <vmid>/vm-<vmid>-disk-N.<fmt>) and which are block storages (raw volumes
// named vm-<vmid>-disk-N).
var storagePlugins = map[string]struct{ fileBased bool }{
	"dir": {true}, "nfs": {true}, "cifs": {true}, "cephfs": {true},
	"lvmthin": {false}, "lvm": {false}, "zfspool": {false}, "rbd": {false},
}

// storage is one datastore instance (per node, or once for a shared one).
type storage struct {
	cfg       Storage
	shared    bool
	fileBased bool
	volumes   map[string]*volume // by volume name, e.g. "import/talos.qcow2", "vm-100-disk-0"
}

// volume is a file or disk image on a storage.
type volume struct {
	name    string
	content string // iso, import, vztmpl, snippets, images
	format  string // iso, qcow2, raw, vmdk, ova, tgz, …
	size    int64  // virtual size for images, file size otherwise
	file    int64  // bytes on the storage (file size)
	vmid    int
	data    []byte
	ctime   int64
}

func newStorage(cfg Storage, shared bool) *storage {
	if cfg.TotalBytes == 0 {
		cfg.TotalBytes = DefaultStorageBytes
	}

	if cfg.Path == "" && storagePlugins[cfg.Type].fileBased {
		cfg.Path = "/mnt/pve/" + cfg.ID
		if cfg.ID == "local" {
			cfg.Path = "/var/lib/vz"
		}
	}

	cfg.Content = slices.Clone(cfg.Content)

	return &storage{cfg: cfg, shared: shared, fileBased: storagePlugins[cfg.Type].fileBased, volumes: map[string]*volume{}}
}

func storageKey(node, id string) string { return node + "/" + id }

// storageOn returns the storage id as seen from node. Callers hold s.mu.
func (s *Server) storageOn(node, id string) *storage {
	if st, ok := s.storages[storageKey("*", id)]; ok {
		return st
	}

	return s.storages[storageKey(node, id)]
}

// storagesOn lists the storages visible from node, sorted by id. Callers hold s.mu.
func (s *Server) storagesOn(node string) []*storage {
	var out []*storage

	for key, st := range s.storages {
		if strings.HasPrefix(key, node+"/") || strings.HasPrefix(key, "*/") {
			out = append(out, st)
		}
	}

	sort.Slice(out, func(i, j int) bool { return out[i].cfg.ID < out[j].cfg.ID })

	return out
}

func (st *storage) supports(content string) bool { return slices.Contains(st.cfg.Content, content) }

func (st *storage) volid(v *volume) string { return st.cfg.ID + ":" + v.name }

func (st *storage) used() int64 {
	var n int64
	for _, v := range st.volumes {
		n += v.size
	}

	return n
}

// defaultFormat is the image format of new disks (PVE: raw unless the storage says otherwise).
func (st *storage) defaultFormat() string { return "raw" }

// path is the file system path PVE reports for a volume.
func (st *storage) path(v *volume) string {
	if !st.fileBased {
		return "/dev/" + st.cfg.ID + "/" + v.name
	}

	dir, file := path.Split(v.name)
	switch strings.TrimSuffix(dir, "/") {
	case "iso":
		return st.cfg.Path + "/template/iso/" + file
	case "vztmpl":
		return st.cfg.Path + "/template/cache/" + file
	case "import":
		return st.cfg.Path + "/import/" + file
	case "snippets":
		return st.cfg.Path + "/snippets/" + file
	default:
		return st.cfg.Path + "/images/" + v.name
	}
}

// splitVolid splits "local:import/x.qcow2"; a bare volume name belongs to def.
func splitVolid(volid, def string) (string, string) {
	if id, name, ok := strings.Cut(volid, ":"); ok {
		return id, name
	}

	return def, volid
}

// allocImage creates a VM image volume: name "" picks the first free vm-<vmid>-disk-N. Callers
// hold s.mu.
func (st *storage) allocImage(vmid int, format, name string, size int64) (*volume, error) {
	if !st.supports("images") {
		return nil, fmt.Errorf("storage '%s' does not support vm images", st.cfg.ID)
	}

	if !st.fileBased {
		format = "raw"
	}

	if name == "" {
		for n := 0; ; n++ {
			name = fmt.Sprintf("vm-%d-disk-%d", vmid, n)
			if st.imageByBase(vmid, name) == nil {
				break
			}
		}
	}

	volname := name
	if st.fileBased {
		if !strings.Contains(name, ".") {
			volname = name + "." + format
		}

		volname = fmt.Sprintf("%d/%s", vmid, volname)
	}

	if _, exists := st.volumes[volname]; exists {
		return nil, fmt.Errorf("volume '%s:%s' already exists", st.cfg.ID, volname)
	}

	v := &volume{name: volname, content: "images", format: format, size: size, file: size, vmid: vmid, ctime: time.Now().Unix()}
	st.volumes[volname] = v

	return v, nil
}

// imageByBase finds a VM image by its base name (vm-100-disk-0, with or without directory and
// extension).
func (st *storage) imageByBase(vmid int, base string) *volume {
	for name, v := range st.volumes {
		b := path.Base(name)
		if v.vmid == vmid && (b == base || strings.TrimSuffix(b, path.Ext(b)) == base) {
			return v
		}
	}

	return nil
}

// contentEntry is an item of GET …/content.
func (st *storage) contentEntry(v *volume) map[string]any {
	e := map[string]any{
		"volid":   st.volid(v),
		"content": v.content,
		"format":  v.format,
		"size":    v.size,
		"ctime":   v.ctime,
	}

	if v.content == "images" {
		e["vmid"] = v.vmid
		e["used"] = v.file
	}

	return e
}

func (s *Server) lookupStorage(c *call) (string, *storage, *apiError) {
	node, e := c.node()
	if e != nil {
		return "", nil, e
	}

	st := s.storageOn(node, c.vars["storage"])
	if st == nil {
		return "", nil, errf("storage '%s' does not exist", c.vars["storage"])
	}

	return node, st, nil
}

// listContent serves GET /nodes/{node}/storage/{storage}/content.
func (s *Server) listContent(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	_, st, e := s.lookupStorage(c)
	if e != nil {
		return nil, e
	}

	content, filter := c.param("content")
	vmidParam, byVM := c.param("vmid")
	out := []map[string]any{}

	for _, v := range st.volumes {
		// PVE::Storage::volume_list lists only the content types the storage is configured for
		if (filter && v.content != content) || !st.supports(v.content) {
			continue
		}

		if byVM && strconv.Itoa(v.vmid) != vmidParam {
			continue
		}

		if s.checkVolumeAccess(c.user, 0, st.volid(v)) != nil {
			continue
		}

		out = append(out, st.contentEntry(v))
	}

	sort.Slice(out, func(i, j int) bool { return out[i]["volid"].(string) < out[j]["volid"].(string) })

	return out, nil
}

func (s *Server) lookupVolume(c *call) (*storage, *volume, *apiError) {
	_, st, e := s.lookupStorage(c)
	if e != nil {
		return nil, nil, e
	}

	id, name := splitVolid(c.vars["volume"], st.cfg.ID)
	if id != st.cfg.ID {
		return nil, nil, errf("volume '%s' does not exist on storage '%s'", c.vars["volume"], st.cfg.ID)
	}

	v, ok := st.volumes[name]
	if !ok {
		return nil, nil, errf("volume '%s:%s' does not exist", id, name)
	}

	return st, v, nil
}

// getContent serves GET /nodes/{node}/storage/{storage}/content/{volume}.
func (s *Server) getContent(c *call) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()

	st, v, e := s.lookupVolume(c)
	if e == nil {
		e = s.checkVolumeAccess(c.user, 0, st.volid(v))
	}

	if e != nil {
		return nil, e
	}

	return map[string]any{"path": st.path(v), "size": v.size, "used": v.file, "format": v.format}, nil
}

// deleteContent serves DELETE /nodes/{node}/storage/{storage}/content/{volume}: an "imgdel"
// task removes the volume.
func (s *Server) deleteContent(c *call) (any, *apiError) {
	s.mu.Lock()
	node, _, e := s.lookupStorage(c)

	var vol *volume
	if e == nil {
		_, vol, e = s.lookupVolume(c)
	}

	// Content.pm delete names the task "<owner vmid>@<storage>", or "<storage>" for volumes
	// without an owner (ISO images, imports)
	sid := c.vars["storage"]
	taskID := sid

	if e == nil {
		// Content.pm delete: backups need AllocateSpace and VM.Backup, the rest Allocate
		vtype, owner := volumeType(vol.name)
		if owner != 0 {
			taskID = fmt.Sprintf("%d@%s", owner, sid)
		}

		if vtype == "backup" && owner != 0 {
			if e = s.check(c.user, "/storage/"+sid, "Datastore.AllocateSpace"); e == nil {
				e = s.check(c.user, fmt.Sprintf("/vms/%d", owner), "VM.Backup")
			}
		} else {
			e = s.check(c.user, "/storage/"+sid, "Datastore.Allocate")
		}
	}
	s.mu.Unlock()

	if e != nil {
		return nil, e
	}

	st := c.vars["storage"]
	_, name := splitVolid(c.vars["volume"], st)
	volid := st + ":" + name

	return s.startTask(c, node, "imgdel", encodeText(taskID), func(r *taskRun) error {
		s.mu.Lock()
		defer s.mu.Unlock()

		sto := s.storageOn(node, st)
		if sto == nil || sto.volumes[name] == nil {
			return fmt.Errorf("volume '%s' does not exist", volid)
		}

		delete(sto.volumes, name)
		r.logf("Removed volume '%s'", volid)

		return nil
	}, nil), nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}

	return 0
}
