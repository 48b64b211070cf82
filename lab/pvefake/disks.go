package pvefake

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var (
	// newDiskRE is PVE's $NEW_DISK_RE: "<storage>:<size in GiB>".
	newDiskRE   = regexp.MustCompile(`^(([^/:\s]+):)?(\d+(\.\d+)?)$`)
	cloudinitRE = regexp.MustCompile(`^(?:([^/:\s]+):)?cloudinit$`)
)

// cloudinitDiskSize is PVE's CLOUDINIT_DISK_SIZE (4 MiB).
const cloudinitDiskSize = 4 << 20

// allocation remembers a volume created while applying drives, for rollback.
type allocation struct {
	st *storage
	v  *volume
}

func rollback(allocs []allocation) {
	for _, a := range allocs {
		delete(a.st.volumes, a.v.name)
	}
}

// sortedDriveKeys returns the drive keys of params in PVE's allocation order.
func sortedDriveKeys(params map[string]string) []string {
	var keys []string

	for k := range params {
		if isDriveKey(k) {
			keys = append(keys, k)
		}
	}

	sort.Slice(keys, func(i, j int) bool { return driveOrder(keys[i]) < driveOrder(keys[j]) })

	return keys
}

// checkDriveStorages runs PVE's synchronous storage checks for new disks and cloud-init drives.
// Callers hold s.mu.
func (s *Server) checkDriveStorages(node string, params map[string]string, defaultStorage string) *apiError {
	for _, key := range sortedDriveKeys(params) {
		file := parsePropertyString(params[key], "file")["file"]

		var id string
		if m := cloudinitRE.FindStringSubmatch(file); m != nil {
			id = m[1]
		} else if m := newDiskRE.FindStringSubmatch(file); m != nil {
			id = m[2]
		} else {
			continue
		}

		if id == "" {
			id = defaultStorage
		}

		if id == "" {
			return errf("no storage ID specified (and no default storage)")
		}

		st := s.storageOn(node, id)
		if st == nil {
			return errf("storage '%s' does not exist", id)
		}

		if !st.supports("images") {
			return paramErr1("storage", "storage '"+id+"' does not support vm images")
		}
	}

	return nil
}

// applyDrives allocates the drives of params (new disks, imports, cloud-init drives, existing
// volumes) and writes them into conf as PVE prints them. Callers hold s.mu.
func (s *Server) applyDrives(node string, vmid int, params map[string]string, defaultStorage string,
	conf map[string]string, r *taskRun,
) ([]allocation, error) {
	var allocs []allocation

	for _, key := range sortedDriveKeys(params) {
		props := parsePropertyString(params[key], "file")
		file := props["file"]
		delete(props, "file")

		old := parsePropertyString(conf[key], "file")
		if conf[key] != "" && old["file"] == file {
			// same volume: only the options change; PVE keeps the recorded size
			if _, ok := props["size"]; !ok && old["size"] != "" {
				props["size"] = old["size"]
			}

			conf[key] = printPropertyString(file, props)

			continue
		}

		printed, alloc, err := s.allocDrive(node, vmid, key, file, props, defaultStorage, r)
		if err != nil {
			rollback(allocs)
			return nil, err
		}

		if alloc != nil {
			allocs = append(allocs, *alloc)
		}

		if conf[key] != "" {
			s.detachDrive(vmid, node, conf, key, false)
		}

		conf[key] = printed
	}

	return allocs, nil
}

func (s *Server) allocDrive(node string, vmid int, key, file string, props map[string]string,
	defaultStorage string, r *taskRun,
) (string, *allocation, error) {
	storeOf := func(id string) (*storage, error) {
		if id == "" {
			id = defaultStorage
		}

		st := s.storageOn(node, id)
		if st == nil {
			return nil, fmt.Errorf("storage '%s' does not exist", id)
		}

		return st, nil
	}

	switch {
	case file == "none" || file == "cdrom" || file == "":
		delete(props, "size")
		return printPropertyString(file, props), nil, nil

	case cloudinitRE.MatchString(file):
		st, err := storeOf(cloudinitRE.FindStringSubmatch(file)[1])
		if err != nil {
			return "", nil, err
		}

		format, name := "raw", fmt.Sprintf("vm-%d-cloudinit", vmid)
		if st.fileBased {
			format = props["format"]
			if format == "" {
				format = "qcow2"
			}

			name += "." + format
		}

		v, err := st.allocImage(vmid, format, name, cloudinitDiskSize)
		if err != nil {
			return "", nil, err
		}

		delete(props, "format")
		props["media"] = "cdrom"

		return printPropertyString(st.volid(v), props), &allocation{st, v}, nil

	case newDiskRE.MatchString(file):
		m := newDiskRE.FindStringSubmatch(file)

		st, err := storeOf(m[2])
		if err != nil {
			return "", nil, err
		}

		size, err := s.newDiskSize(node, key, m[3], props, st, r)
		if err != nil {
			return "", nil, err
		}

		format := props["format"]
		if format == "" {
			format = st.defaultFormat()
		}

		v, err := st.allocImage(vmid, format, "", size)
		if err != nil {
			return "", nil, err
		}

		if src, ok := props["import-from"]; ok {
			// The new disk holds what it was imported from: the guest boots that image.
			id, name := splitVolid(src, "")
			if from := s.storageOn(node, id); from != nil && from.volumes[name] != nil {
				v.data = from.volumes[name].data
			}
		}

		delete(props, "format")
		delete(props, "import-from")
		props["size"] = formatSize(size)

		return printPropertyString(st.volid(v), props), &allocation{st, v}, nil

	default:
		id, name := splitVolid(file, defaultStorage)

		st := s.storageOn(node, id)
		if st == nil || st.volumes[name] == nil {
			return "", nil, fmt.Errorf("volume '%s' does not exist", file)
		}

		props["size"] = formatSize(st.volumes[name].size)

		return printPropertyString(id+":"+name, props), nil, nil
	}
}

// newDiskSize is the size of a new disk: the import source's virtual size with import-from,
// the EFI vars or TPM state size, else the requested GiB.
func (s *Server) newDiskSize(node, key, gib string, props map[string]string, st *storage, r *taskRun) (int64, error) {
	if src, ok := props["import-from"]; ok {
		id, name := splitVolid(src, "")

		from := s.storageOn(node, id)
		if from == nil || from.volumes[name] == nil {
			return 0, fmt.Errorf("volume '%s' does not exist", src)
		}

		size := imageVirtualSize(from.volumes[name])
		if r != nil {
			r.logf("importing disk '%s' to VM as %s (%s)", src, key, formatSize(size))
			r.logf("transferred %s of %s (100.00%%)", formatSize(size), formatSize(size))
		}

		return size, nil
	}

	switch key {
	case "efidisk0":
		if !st.fileBased {
			return 4 << 20, nil
		}

		if props["efitype"] == "4m" {
			return 540672, nil
		}

		return 131072, nil
	case "tpmstate0":
		return 4 << 20, nil
	}

	f, _ := strconv.ParseFloat(gib, 64)

	return int64(f * (1 << 30)), nil
}

// detachDrive removes key from conf: a cloud-init volume is freed, an owned disk becomes
// unusedN (or is freed with force). Callers hold s.mu.
func (s *Server) detachDrive(vmid int, node string, conf map[string]string, key string, force bool) {
	file := parsePropertyString(conf[key], "file")["file"]
	delete(conf, key)

	if strings.HasPrefix(key, "unused") {
		s.freeVolume(node, file)
		return
	}

	id, name := splitVolid(file, "")

	st := s.storageOn(node, id)
	if st == nil || st.volumes[name] == nil || st.volumes[name].vmid != vmid {
		return
	}

	if strings.Contains(name, "cloudinit") || force {
		delete(st.volumes, name)
		return
	}

	for i := 0; ; i++ {
		u := "unused" + strconv.Itoa(i)
		if _, used := conf[u]; !used {
			conf[u] = file
			return
		}
	}
}

func (s *Server) freeVolume(node, volid string) {
	id, name := splitVolid(volid, "")
	if st := s.storageOn(node, id); st != nil {
		delete(st.volumes, name)
	}
}

// configVolumes lists the volume ids a configuration references.
func configVolumes(conf map[string]string) []string {
	var out []string

	for k, v := range conf {
		if isDriveKey(k) || strings.HasPrefix(k, "unused") {
			file := parsePropertyString(v, "file")["file"]
			if strings.Contains(file, ":") {
				out = append(out, file)
			}
		}
	}

	sort.Strings(out)

	return out
}

// driveSize reads the size= of a drive option in bytes.
func driveSize(v string) int64 {
	n, _ := parseSize(parsePropertyString(v, "file")["size"])
	return n
}
