package pvefake

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

// POST /nodes/{node}/storage/{storage}/content ("Allocate disk images"): pve-storage's
// API2/Storage/Content.pm create, PVE::Storage::vdisk_alloc and the storage plugins'
// alloc_image. The Proxmox CSI plugin creates its volumes this way, owned by a VM that need not
// exist (9999 by default) until it attaches them with PUT …/qemu/{vmid}/config.

var (
	// allocSizeRE is the "size" parameter's schema pattern (anchored, as PVE::JSONSchema does).
	allocSizeRE = regexp.MustCompile(`^(\d+)([MG]?)$`)
	// nameFormatRE is how Content.pm extracts the format from the file name.
	nameFormatRE = regexp.MustCompile(`\.(raw|qcow2|vmdk)$`)
	// dirImageRE is Plugin.pm's parse_name_dir for image files (its vm-/base-/subvol- branch is a
	// case of the general one).
	dirImageRE = regexp.MustCompile(`^[^/\s]+\.(raw|qcow2|vmdk|subvol)$`)
	snapFileRE = regexp.MustCompile(`^snap-.*\.qcow2$`)
)

// allocContent serves POST /nodes/{node}/storage/{storage}/content. PVE runs it synchronously
// and answers the new volume's id ("local-lvm:vm-9999-pvc-x", "local:9999/vm-9999-pvc-x.raw").
// The storage's content types are not checked (vdisk_alloc does not): a volume allocated on a
// storage without "images" exists, but GET …/content does not list it.
func (s *Server) allocContent(c *call) (any, *apiError) {
	if e := s.schemaParams(c); e != nil {
		return nil, e
	}

	name, _ := c.param("filename")
	sizeStr, _ := c.param("size")
	format, _ := c.param("format")
	vmidStr, _ := c.param("vmid")
	vmid, _ := strconv.Atoi(vmidStr)

	// Content.pm: the size is in KiB unless suffixed M or G
	m := allocSizeRE.FindStringSubmatch(sizeStr)
	if m == nil {
		return nil, paramErr1("size", "unable to parse size '"+sizeStr+"'")
	}

	kib, _ := strconv.ParseInt(m[1], 10, 64)
	kib *= map[string]int64{"": 1, "M": 1 << 10, "G": 1 << 20}[m[2]]

	if fm := nameFormatRE.FindStringSubmatch(name); fm != nil {
		if format != "" && format != fm[1] {
			return nil, paramErr1("format", fmt.Sprintf("different storage formats (%s != %s)", format, fm[1]))
		}

		format = fm[1]
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	_, st, e := s.lookupStorage(c)
	if e != nil {
		return nil, e
	}

	if format == "" {
		format = st.defaultFormat()
	}

	v, err := st.allocNamed(vmid, format, name, kib<<10)
	if err != nil {
		return nil, errf("%s", err)
	}

	s.opts.Logf("pvefake: allocated %s (%s, %s)", st.volid(v), formatSize(v.size), v.format)

	return st.volid(v), nil
}

// schemaParams validates the call's parameters against the method's schema (types, patterns,
// enumerations, required ones), as PVE's RESTHandler does before the handler runs.
func (s *Server) schemaParams(c *call) *apiError {
	var se *pveschema.Error
	if !errors.As(s.permSchema.CheckRequest(c.r.Method, c.r.URL.EscapedPath(), c.params), &se) {
		return nil
	}

	errs := map[string]string{}
	for _, v := range se.Violations {
		errs[v.Field] = v.Rule
	}

	return paramErr(errs)
}

// allocNamed is the storage plugin's alloc_image for a given name. Callers hold s.mu.
func (st *storage) allocNamed(vmid int, format, name string, size int64) (*volume, error) {
	volname := name

	switch typ := st.cfg.Type; {
	case st.fileBased:
		// Plugin.pm alloc_image: <path>/images/<vmid>/<name>, the name's extension the format
		if snapFileRE.MatchString(name) {
			return nil, fmt.Errorf("'%s' is a snapshot filename, not a volume!", name) //nolint:staticcheck // PVE's words
		}

		fm := dirImageRE.FindStringSubmatch(name)
		if fm == nil {
			return nil, fmt.Errorf("unable to parse volume filename '%s'", name)
		}

		if fm[1] != format {
			// sic: PVE's message has an unbalanced quote
			return nil, fmt.Errorf("illegal name '%s' - wrong extension for format ('%s != '%s')", name, fm[1], format)
		}

		volname = fmt.Sprintf("%d/%s", vmid, name)
		if v := st.volumes[volname]; v != nil {
			return nil, fmt.Errorf("disk image '%s' already exists", st.path(v))
		}

		if format == "subvol" && size != 0 {
			return nil, fmt.Errorf("storage does not support subvol quotas")
		}
	case typ == "zfspool" && format == "subvol":
		if !strings.HasPrefix(name, fmt.Sprintf("subvol-%d-", vmid)) {
			return nil, fmt.Errorf("illegal name '%s' - should be 'subvol-%d-*'", name, vmid)
		}
	default:
		// LvmThinPlugin, LVMPlugin (PVE 8's raw-only form), ZFSPoolPlugin and RBDPlugin
		if format != "raw" && typ != "rbd" {
			return nil, fmt.Errorf("unsupported format '%s'", format)
		}

		if !strings.HasPrefix(name, fmt.Sprintf("vm-%d-", vmid)) {
			return nil, fmt.Errorf("illegal name '%s' - should be 'vm-%d-*'", name, vmid)
		}

		format = "raw"
	}

	if _, exists := st.volumes[volname]; exists {
		return nil, blockVolumeExists(st.cfg.Type, name)
	}

	v := &volume{name: volname, content: "images", format: format, size: size, file: size, vmid: vmid, ctime: time.Now().Unix()}
	st.volumes[volname] = v

	return v, nil
}

// blockVolumeExists is the tool's error when a block volume's name is taken (run_command's
// "<errmsg>: <last stderr line>"). LVM volume groups are named "pve" and ZFS pools "rpool/data",
// as the PVE installer names them.
func blockVolumeExists(typ, name string) error {
	switch typ {
	case "zfspool":
		return fmt.Errorf("zfs error: cannot create 'rpool/data/%s': dataset already exists", name)
	case "rbd":
		return fmt.Errorf("rbd create '%s' error: rbd: create error: (17) File exists", name)
	}

	return fmt.Errorf("lvcreate 'pve/%s' error:   Logical Volume \"%s\" already exists in volume group \"pve\"", name, name)
}
