package pvefake

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// imageServer stands in for the Image Factory: HEAD/GET of a few files.
func imageServer(t *testing.T, files map[string][]byte) *httptest.Server {
	t.Helper()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}

		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if strings.HasSuffix(r.URL.Path, "/disposition") {
			w.Header().Set("Content-Disposition", `attachment; filename="named.qcow2"`)
		}

		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)

	return srv
}

func TestQueryURLMetadataFetchesTheURL(t *testing.T) {
	t.Parallel()

	img := QCOW2Image(2 << 30)
	srv := imageServer(t, map[string][]byte{"/image/abc/v1.11.5/nocloud-amd64.qcow2": img, "/disposition": img})
	c := newClient(t, start(t, Options{}))

	meta := c.ok("GET", "nodes/pve1/query-url-metadata", form("url", srv.URL+"/image/abc/v1.11.5/nocloud-amd64.qcow2", "verify-certificates", "0")).dataMap(t)
	if meta["filename"] != "nocloud-amd64.qcow2" || meta["size"] != float64(len(img)) || meta["mimetype"] != "application/octet-stream" {
		t.Fatalf("metadata = %v", meta)
	}

	if f := c.ok("GET", "nodes/pve1/query-url-metadata", form("url", srv.URL+"/disposition")).dataMap(t)["filename"]; f != "named.qcow2" {
		t.Fatalf("filename from Content-Disposition = %v", f)
	}

	if r := c.do("GET", "nodes/pve1/query-url-metadata", form("url", srv.URL+"/nope")); r.Reason != "invalid server response: '404 Not Found'" {
		t.Fatalf("404: %d %q", r.Code, r.Reason)
	}

	if r := c.do("GET", "nodes/pve1/query-url-metadata", form("url", "https://example.com/x.iso")); r.Code != 500 || !strings.Contains(r.Reason, "loopback URLs only") {
		t.Fatalf("remote URL: %d %q", r.Code, r.Reason)
	}
}

func TestDownloadURLCreatesTheVolume(t *testing.T) {
	t.Parallel()

	img := QCOW2Image(1 << 30)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("iso9660 image"))
	_ = zw.Close()

	srv := imageServer(t, map[string][]byte{"/talos.qcow2": img, "/talos.iso.gz": gz.Bytes()})
	s := start(t, Options{})
	c := newClient(t, s)

	sum := sha256.Sum256(img)
	dl := form("url", srv.URL+"/talos.qcow2", "content", "import", "filename", "talos.qcow2", "node", "pve1", "storage", "local",
		"checksum", hex.EncodeToString(sum[:]), "checksum-algorithm", "sha256", "verify-certificates", "1")

	upid := c.ok("POST", "nodes/pve1/storage/local/download-url", dl).data().(string)
	if !strings.Contains(upid, ":download:talos.qcow2:root@pam!lab:") {
		t.Fatalf("UPID = %s", upid)
	}

	if exit := c.waitTask("pve1", upid); exit != "OK" {
		t.Fatalf("download: %s", exit)
	}

	list := c.ok("GET", "nodes/pve1/storage/local/content", form("content", "import")).dataList(t)
	if e := list[0].(map[string]any); len(list) != 1 || e["volid"] != "local:import/talos.qcow2" || e["size"] != float64(len(img)) || e["format"] != "qcow2" {
		t.Fatalf("content = %v", list)
	}

	upid = c.ok("POST", "nodes/pve1/storage/local/download-url", dl).data().(string)
	if exit := c.waitTask("pve1", upid); exit != "refusing to override existing file '/var/lib/vz/import/talos.qcow2'" {
		t.Fatalf("second download: %q", exit)
	}

	iso := form("url", srv.URL+"/talos.iso.gz", "content", "iso", "filename", "talos.iso", "compression", "gz")
	c.waitTask("pve1", c.ok("POST", "nodes/pve1/storage/local/download-url", iso).data().(string))

	if vols := s.Volumes("pve1", "local"); len(vols) != 2 || string(vols[1].Data) != "iso9660 image" {
		t.Fatalf("volumes = %+v", vols)
	}

	gzImport := form("url", srv.URL+"/talos.qcow2", "content", "import", "filename", "other.qcow2", "compression", "gz")
	if exit := c.waitTask("pve1", c.ok("POST", "nodes/pve1/storage/local/download-url", gzImport).data().(string)); exit != "decompression not supported for import" {
		t.Fatalf("compressed import: %q", exit)
	}

	checks := []struct {
		path   string
		params url.Values
		reason string
	}{
		{"nodes/pve1/storage/local-lvm/download-url", form("url", srv.URL+"/talos.qcow2", "content", "import", "filename", "a.qcow2"), "can't upload to storage type 'lvmthin', not a file based storage!"},
		{"nodes/pve1/storage/local/download-url", form("url", srv.URL+"/talos.qcow2", "content", "import", "filename", "a.zip"), "Parameter verification failed."},
		{"nodes/pve1/storage/nope/download-url", form("url", srv.URL+"/talos.qcow2", "content", "import", "filename", "a.qcow2"), "storage 'nope' does not exist"},
	}

	for _, tc := range checks {
		if r := c.do("POST", tc.path, tc.params); r.Reason != tc.reason {
			t.Errorf("%s %v: %d %q, want %q", tc.path, tc.params, r.Code, r.Reason, tc.reason)
		}
	}

	// delete by full volid or by name relative to the storage, like bpg's overwrite path
	c.ok("DELETE", "nodes/pve1/storage/local/content/"+url.PathEscape("import/talos.qcow2"), nil)

	if r := c.do("DELETE", "nodes/pve1/storage/local/content/"+url.PathEscape("local:import/talos.qcow2"), nil); r.Code != 500 || !strings.Contains(r.Reason, "does not exist") {
		t.Fatalf("second delete: %d %q", r.Code, r.Reason)
	}
}

func TestSharedStorageIsVisibleFromEveryNode(t *testing.T) {
	t.Parallel()

	s := start(t, Options{
		Nodes:          []string{"pve1", "pve2"},
		SharedStorages: []Storage{{ID: "nfs", Type: "nfs", Content: []string{"import", "images"}}},
	})
	c := newClient(t, s)

	if _, err := s.AddFile("pve1", "nfs", "import/talos.qcow2", QCOW2Image(1<<30)); err != nil {
		t.Fatal(err)
	}

	list := c.ok("GET", "nodes/pve2/storage/nfs/content", nil).dataList(t)
	if len(list) != 1 {
		t.Fatalf("pve2 sees %v", list)
	}

	upid := c.ok("POST", "nodes/pve2/qemu", form("vmid", "200", "scsi0", "nfs:0,import-from=nfs:import/talos.qcow2")).data().(string)
	if exit := c.waitTask("pve2", upid); exit != "OK" {
		t.Fatalf("create on pve2: %s", exit)
	}

	if v, _ := s.VM(200); v.Config["scsi0"] != "nfs:200/vm-200-disk-0.raw,size=1G" {
		t.Fatalf("scsi0 = %q", v.Config["scsi0"])
	}

	if vols := s.Volumes("pve1", "local"); len(vols) != 0 {
		t.Fatalf("pve1 local = %+v", vols)
	}

	nodes := c.ok("GET", "nodes/pve1/storage", nil).dataList(t)
	if len(nodes) != 3 {
		t.Fatalf("storages = %v", nodes)
	}
}
