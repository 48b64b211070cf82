package pvefake

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

// allocDisk is the Proxmox CSI plugin's CreateVMDisk: size in KiB, node and storage repeated.
func allocDisk(storage, vmid, filename, size string, extra ...string) url.Values {
	return form(append([]string{"vmid", vmid, "node", "pve1", "storage", storage, "filename", filename, "size", size}, extra...)...)
}

func TestAllocateDiskImage(t *testing.T) {
	t.Parallel()

	for _, v := range pveschema.Versions() {
		sch, err := pveschema.Load(v)
		if err != nil {
			t.Fatal(err)
		}

		storages := append(DefaultStorages(), Storage{ID: "data", Type: "dir", Content: []string{"images"}})
		s := start(t, Options{Schema: sch, Storages: storages})
		c := newClient(t, s)

		// VM 9999 does not exist: PVE allocates for any owner id
		volid := c.ok("POST", "nodes/pve1/storage/local-lvm/content", allocDisk("local-lvm", "9999", "vm-9999-pvc-a", "1048576")).data()
		if volid != "local-lvm:vm-9999-pvc-a" {
			t.Fatalf("PVE %s: volid %v", v, volid)
		}

		if got := c.ok("POST", "nodes/pve1/storage/data/content", allocDisk("data", "9999", "vm-9999-pvc-b.qcow2", "10G")).data(); got != "data:9999/vm-9999-pvc-b.qcow2" {
			t.Fatalf("PVE %s: dir volid %v", v, got)
		}

		c.ok("POST", "nodes/pve1/storage/data/content", allocDisk("data", "9999", "vm-9999-pvc-c.raw", "512M", "format", "raw"))

		list := c.ok("GET", "nodes/pve1/storage/local-lvm/content", form("vmid", "9999")).dataList(t)
		want := map[string]any{"volid": "local-lvm:vm-9999-pvc-a", "content": "images", "format": "raw", "size": float64(1 << 30),
			"used": float64(1 << 30), "vmid": float64(9999)}
		if len(list) != 1 {
			t.Fatalf("PVE %s: content %v", v, list)
		}

		got := list[0].(map[string]any)
		delete(got, "ctime")

		if !reflect.DeepEqual(got, want) {
			t.Fatalf("PVE %s: content entry %v, want %v", v, got, want)
		}

		info := c.ok("GET", "nodes/pve1/storage/data/content/"+url.PathEscape("data:9999/vm-9999-pvc-b.qcow2"), nil).dataMap(t)
		if info["path"] != "/mnt/pve/data/images/9999/vm-9999-pvc-b.qcow2" || info["size"] != float64(10<<30) || info["format"] != "qcow2" {
			t.Fatalf("PVE %s: volume info %v", v, info)
		}

		if n := len(c.ok("GET", "nodes/pve1/storage/data/content", nil).dataList(t)); n != 2 {
			t.Fatalf("PVE %s: data holds %d volumes, want 2", v, n)
		}

		// vdisk_alloc does not check the storage's content types; the list only shows those
		if got := c.ok("POST", "nodes/pve1/storage/local/content", allocDisk("local", "100", "vm-100-disk-9.raw", "1024")).data(); got != "local:100/vm-100-disk-9.raw" {
			t.Fatalf("PVE %s: allocation on local: %v", v, got)
		}

		if l := c.ok("GET", "nodes/pve1/storage/local/content", nil).dataList(t); len(l) != 0 {
			t.Fatalf("PVE %s: local lists %v", v, l)
		}

		// DELETE: an imgdel task named <owner>@<storage>
		upid := c.ok("DELETE", "nodes/pve1/storage/local-lvm/content/"+url.PathEscape("local-lvm:vm-9999-pvc-a"), nil).data().(string)
		if !strings.Contains(upid, ":imgdel:9999@local-lvm:") {
			t.Fatalf("PVE %s: UPID %s", v, upid)
		}

		if exit := c.waitTask("pve1", upid); exit != "OK" {
			t.Fatalf("PVE %s: delete: %s", v, exit)
		}

		if l := c.ok("GET", "nodes/pve1/storage/local-lvm/content", nil).dataList(t); len(l) != 0 {
			t.Fatalf("PVE %s: after delete %v", v, l)
		}

		// the name is free again
		c.ok("POST", "nodes/pve1/storage/local-lvm/content", allocDisk("local-lvm", "9999", "vm-9999-pvc-a", "1G"))

		if vs := s.SchemaViolations(); len(vs) != 0 {
			t.Errorf("PVE %s: schema violations %v", v, vs)
		}
	}
}

func TestAllocateDiskImageRefusals(t *testing.T) {
	t.Parallel()

	storages := append(DefaultStorages(), Storage{ID: "data", Type: "dir", Content: []string{"images"}},
		Storage{ID: "tank", Type: "zfspool", Content: []string{"images", "rootdir"}},
		Storage{ID: "ceph", Type: "rbd", Content: []string{"images"}})
	c := newClient(t, start(t, Options{Storages: storages}))

	c.ok("POST", "nodes/pve1/storage/local-lvm/content", allocDisk("local-lvm", "9999", "vm-9999-pvc-a", "1G"))
	c.ok("POST", "nodes/pve1/storage/data/content", allocDisk("data", "9999", "vm-9999-pvc-a.raw", "1G"))
	c.ok("POST", "nodes/pve1/storage/tank/content", allocDisk("tank", "9999", "vm-9999-pvc-a", "1G"))
	c.ok("POST", "nodes/pve1/storage/ceph/content", allocDisk("ceph", "9999", "vm-9999-pvc-a", "1G"))

	// dir storages take any image file name with a format extension
	c.ok("POST", "nodes/pve1/storage/data/content", allocDisk("data", "101", "scratch.vmdk", "64M"))

	cases := []struct {
		storage string
		params  url.Values
		code    int
		reason  string
		errs    map[string]any
	}{
		{"local-lvm", allocDisk("local-lvm", "9999", "vm-9999-pvc-a", "1G"), 500,
			`lvcreate 'pve/vm-9999-pvc-a' error:   Logical Volume "vm-9999-pvc-a" already exists in volume group "pve"`, nil},
		{"data", allocDisk("data", "9999", "vm-9999-pvc-a.raw", "1G"), 500,
			"disk image '/mnt/pve/data/images/9999/vm-9999-pvc-a.raw' already exists", nil},
		{"tank", allocDisk("tank", "9999", "vm-9999-pvc-a", "1G"), 500,
			"zfs error: cannot create 'rpool/data/vm-9999-pvc-a': dataset already exists", nil},
		{"ceph", allocDisk("ceph", "9999", "vm-9999-pvc-a", "1G"), 500,
			"rbd create 'vm-9999-pvc-a' error: rbd: create error: (17) File exists", nil},
		{"local-lvm", allocDisk("local-lvm", "9999", "pvc-a", "1G"), 500, "illegal name 'pvc-a' - should be 'vm-9999-*'", nil},
		{"local-lvm", allocDisk("local-lvm", "9999", "vm-100-pvc-a", "1G"), 500, "illegal name 'vm-100-pvc-a' - should be 'vm-9999-*'", nil},
		{"tank", allocDisk("tank", "9999", "vm-9999-ct", "1G", "format", "subvol"), 500, "illegal name 'vm-9999-ct' - should be 'subvol-9999-*'", nil},
		{"local-lvm", allocDisk("local-lvm", "9999", "vm-9999-pvc-q.qcow2", "1G"), 500, "unsupported format 'qcow2'", nil},
		{"data", allocDisk("data", "9999", "vm-9999-pvc-b", "1G"), 500, "unable to parse volume filename 'vm-9999-pvc-b'", nil},
		{"data", allocDisk("data", "9999", "snap-x.qcow2", "1G"), 500, "'snap-x.qcow2' is a snapshot filename, not a volume!", nil},
		{"data", allocDisk("data", "9999", "vm-9999-pvc-b.raw", "1G", "format", "qcow2"), 400, "Parameter verification failed.",
			map[string]any{"format": "different storage formats (qcow2 != raw)\n"}},
		{"nope", allocDisk("nope", "9999", "vm-9999-pvc-a", "1G"), 500, "storage 'nope' does not exist", nil},
		{"local-lvm", allocDisk("local-lvm", "9999", "vm-9999-pvc-k", "512K"), 400, "Parameter verification failed.",
			map[string]any{"size": "value does not match the regex pattern\n"}},
		{"local-lvm", allocDisk("local-lvm", "99", "vm-99-pvc-k", "1G"), 400, "Parameter verification failed.",
			map[string]any{"vmid": "invalid format - value does not look like a valid VM ID\n"}},
		{"local-lvm", allocDisk("local-lvm", "9999", "vm-9999-pvc-k", "1G", "format", "ext4"), 400, "Parameter verification failed.",
			map[string]any{"format": "value 'ext4' does not have a value in the enumeration 'raw, qcow2, subvol, vmdk'\n"}},
		{"local-lvm", form("filename", "vm-9999-pvc-k"), 400, "Parameter verification failed.",
			map[string]any{"size": "property is missing and it is not optional\n", "vmid": "property is missing and it is not optional\n"}},
	}

	for _, tc := range cases {
		r := c.do("POST", "nodes/pve1/storage/"+tc.storage+"/content", tc.params)
		if r.Code != tc.code || r.Reason != tc.reason {
			t.Errorf("%v: %d %q, want %d %q", tc.params, r.Code, r.Reason, tc.code, tc.reason)
		}

		if tc.errs != nil && !reflect.DeepEqual(r.Body["errors"], tc.errs) {
			t.Errorf("%v: errors %v, want %v", tc.params, r.Body["errors"], tc.errs)
		}
	}
}

// csiAccess is a privilege separated token for the CSI plugin; its user holds the ACL entries
// too, since a token's privileges are the intersection of its own and its user's.
func csiAccess(acl ...ACL) *Access {
	acc := &Access{
		Users:  []User{{ID: "csi@pve"}},
		Tokens: []Token{{ID: "csi@pve!csi", Secret: limitedSecret, Privsep: true}},
		Roles:  []Role{{ID: "VMAudit", Privs: []string{"VM.Audit"}}, {ID: "VMDisk", Privs: []string{"VM.Audit", "VM.Config.Disk"}}},
	}

	for _, a := range acl {
		acc.ACL = append(acc.ACL, a)
		a.UGID = "csi@pve!csi"
		acc.ACL = append(acc.ACL, a)
	}

	return acc
}

func TestAllocateDiskImageNeedsAllocateSpace(t *testing.T) {
	t.Parallel()

	s := startAccess(t, "9.1.3", csiAccess(
		ACL{Path: "/storage/local-lvm", Role: "PVEDatastoreUser", UGID: "csi@pve", Propagate: true},
		ACL{Path: "/storage/local", Role: "PVEAuditor", UGID: "csi@pve", Propagate: true},
	))
	c := tokenClient(t, s, "csi@pve!csi", limitedSecret)

	if got := c.ok("POST", "nodes/pve1/storage/local-lvm/content", allocDisk("local-lvm", "9999", "vm-9999-pvc-a", "1G")).data(); got != "local-lvm:vm-9999-pvc-a" {
		t.Fatalf("volid %v", got)
	}

	denied(t, c.do("POST", "nodes/pve1/storage/local/content", allocDisk("local", "9999", "vm-9999-pvc-a.raw", "1G")),
		"Permission check failed (/storage/local, Datastore.AllocateSpace)")

	// the permission check comes before the storage lookup, as in PVE
	denied(t, c.do("POST", "nodes/pve1/storage/nope/content", allocDisk("nope", "9999", "vm-9999-pvc-a", "1G")),
		"Permission check failed (/storage/nope, Datastore.AllocateSpace)")

	// deleting an image takes Datastore.Allocate, which PVEDatastoreUser lacks
	denied(t, c.do("DELETE", "nodes/pve1/storage/local-lvm/content/"+url.PathEscape("local-lvm:vm-9999-pvc-a"), nil),
		"Permission check failed (/storage/local-lvm, Datastore.Allocate)")
}

func TestAttachAllocatedVolumeNeedsConfigDisk(t *testing.T) {
	t.Parallel()

	// VMDisk on /vms/100 only: enough to change VM 100's drives, not to use VM 9999's volumes
	s := startAccess(t, "9.1.3", csiAccess(
		ACL{Path: "/storage/local-lvm", Role: "PVEDatastoreUser", UGID: "csi@pve", Propagate: true},
		ACL{Path: "/vms/100", Role: "VMDisk", UGID: "csi@pve", Propagate: true},
		ACL{Path: "/vms/101", Role: "VMAudit", UGID: "csi@pve", Propagate: true},
	))
	root := newClient(t, s)

	for _, id := range []string{"100", "101"} {
		root.waitTask("pve1", root.ok("POST", "nodes/pve1/qemu", form("vmid", id, "scsihw", "virtio-scsi-single")).data().(string))
	}

	c := tokenClient(t, s, "csi@pve!csi", limitedSecret)
	volid := c.ok("POST", "nodes/pve1/storage/local-lvm/content", allocDisk("local-lvm", "9999", "vm-9999-pvc-a", "1048576")).data().(string)
	attach := form("scsi1", volid+",backup=0,iothread=1,wwn=0x5056432d49443031")

	denied(t, c.do("PUT", "nodes/pve1/qemu/101/config", attach),
		"Permission check failed (/vms/101, VM.Config.Disk|VM.Config.CDROM|VM.Config.CPU|VM.Config.Memory|VM.Config.Network|VM.Config.HWType|VM.Config.Options|VM.Config.Cloudinit)")

	// check_volume_access: a volume owned by another VM needs VM.Config.Disk on that VM too
	denied(t, c.do("PUT", "nodes/pve1/qemu/100/config", attach), "Permission check failed (/vms/9999, VM.Config.Disk)")

	root.ok("PUT", "access/acl", form("path", "/vms/9999", "roles", "VMDisk", "users", "csi@pve", "tokens", "csi@pve!csi"))

	if r := c.do("PUT", "nodes/pve1/qemu/100/config", attach); r.Code != http.StatusOK {
		t.Fatalf("attach: %d %q", r.Code, r.Reason)
	}

	vm, _ := s.VM(100)
	if got := vm.Config["scsi1"]; got != "local-lvm:vm-9999-pvc-a,backup=0,iothread=1,size=1G,wwn=0x5056432d49443031" {
		t.Fatalf("scsi1 = %q", got)
	}

	// detached, the volume is not VM 100's: it is dropped from the config, not made unused
	c.ok("PUT", "nodes/pve1/qemu/100/config", form("delete", "scsi1"))

	vm, _ = s.VM(100)
	if _, ok := vm.Config["unused0"]; ok || vm.Config["scsi1"] != "" {
		t.Fatalf("after detach: %v", vm.Config)
	}

	if vols := s.Volumes("pve1", "local-lvm"); len(vols) != 1 || vols[0].VolID != "local-lvm:vm-9999-pvc-a" {
		t.Fatalf("volumes after detach: %+v", vols)
	}
}
