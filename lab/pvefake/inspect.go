package pvefake

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
)

// VM describes a virtual machine for inspection.
type VM struct {
	Node    string
	VMID    int
	Name    string
	Running bool
	// Config is a copy of the configuration as PVE stores it (drives as printed, e.g.
	// "local-lvm:vm-100-disk-0,discard=on,size=20G,ssd=1").
	Config map[string]string
}

// Volume describes a volume for inspection.
type Volume struct {
	// VolID is "<storage>:<name>", e.g. "local:import/talos.qcow2" or "local-lvm:vm-100-disk-0".
	VolID   string
	Node    string // empty for shared storages
	Storage string
	Content string
	Format  string
	// Size is the virtual size of images and the file size of other content.
	Size int64
	VMID int
	// Data holds a downloaded file's bytes, or for a VM disk imported from one (import-from) the
	// bytes it was imported from (nil for other VM images). Do not modify.
	Data []byte
}

func (s *Server) vmInfo(v *vm) VM {
	return VM{Node: v.node, VMID: v.id, Name: v.config["name"], Running: v.running, Config: maps.Clone(v.config)}
}

// VMs lists the VMs of all nodes by id.
func (s *Server) VMs() []VM {
	s.mu.Lock()
	defer s.mu.Unlock()

	out := []VM{}
	for _, v := range s.sortedVMs() {
		out = append(out, s.vmInfo(v))
	}

	return out
}

// VM returns the VM with the given id.
func (s *Server) VM(vmid int) (VM, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()

	v := s.vms[vmid]
	if v == nil || v.creating {
		return VM{}, false
	}

	return s.vmInfo(v), true
}

// Volumes lists the volumes of a storage as seen from node (any node for a shared storage),
// sorted by volume id; nil if the storage does not exist there.
func (s *Server) Volumes(node, storageID string) []Volume {
	s.mu.Lock()
	defer s.mu.Unlock()

	st := s.storageOn(node, storageID)
	if st == nil {
		return nil
	}

	owner := node
	if st.shared {
		owner = ""
	}

	out := []Volume{}
	for _, v := range st.volumes {
		out = append(out, Volume{
			VolID: st.volid(v), Node: owner, Storage: st.cfg.ID, Content: v.content, Format: v.format,
			Size: v.size, VMID: v.vmid, Data: v.data,
		})
	}

	sort.Slice(out, func(i, j int) bool { return out[i].VolID < out[j].VolID })

	return out
}

// AddFile puts a file volume on a file based storage, e.g. AddFile("pve1", "local",
// "import/talos.qcow2", data), as if it had been uploaded outside the API under test.
func (s *Server) AddFile(node, storageID, name string, data []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	st := s.storageOn(node, storageID)
	if st == nil {
		return "", fmt.Errorf("storage %q does not exist on node %q", storageID, node)
	}

	content, file := path.Split(name)
	content = strings.TrimSuffix(content, "/")

	if !st.fileBased || !st.supports(content) {
		return "", fmt.Errorf("storage %q does not hold %q files", storageID, content)
	}

	format, e := downloadFormat(content, file)
	if e != nil {
		return "", fmt.Errorf("file name %q: %s", file, e.Errors["filename"])
	}

	st.volumes[name] = &volume{
		name: name, content: content, format: format, size: int64(len(data)), file: int64(len(data)),
		data: append([]byte(nil), data...), ctime: time.Now().Unix(),
	}

	return storageID + ":" + name, nil
}

// Calls counts the calls per route key ("GET /version", "POST /nodes/{node}/qemu", …); calls
// to routes the fake lacks count under "UNKNOWN <METHOD> <path>".
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()

	return maps.Clone(s.calls)
}

// Denied lists every call the fake refused with 403 (a failed permission check), as
// "<METHOD> <path>: <message>", in order.
func (s *Server) Denied() []string {
	s.mu.Lock()
	defer s.mu.Unlock()

	return slices.Clone(s.denied)
}

// CallCount returns the number of calls to one route key.
func (s *Server) CallCount(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.calls[key]
}

// ResetCalls zeroes the call counts.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.calls = map[string]int{}
}
