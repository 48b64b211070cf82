package pvefake

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"crypto/md5"  //nolint:gosec // PVE offers md5 checksums
	"crypto/sha1" //nolint:gosec // PVE offers sha1 checksums
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

var (
	urlRE         = regexp.MustCompile(`^https?://.*`)
	unsafeCharRE  = regexp.MustCompile(`[^a-zA-Z0-9_.+=-]`)
	isoExtRE      = regexp.MustCompile(`(?i)\.(iso|img)$`)
	vztmplExtRE   = regexp.MustCompile(`\.tar\.(gz|xz|zst|bz2)$`)
	importExtRE   = regexp.MustCompile(`^[^/\x00-\x1f]+\.(ova|ovf|qcow2|raw|vmdk)$`)
	checksumAlgos = map[string]func() hash.Hash{
		"md5": md5.New, "sha1": sha1.New, "sha224": sha256.New224, "sha256": sha256.New,
		"sha384": sha512.New384, "sha512": sha512.New,
	}
	compressions = []string{"gz", "lzo", "zst", "bz2"}
)

const maxDownloadBytes = 4 << 30

// errNotLoopback refuses connections outside loopback: the fake fetches the lab's own servers.
var errNotLoopback = errors.New("pvefake fetches loopback URLs only")

// fetcher holds two clients: one verifying TLS certificates, one not (verify-certificates=0).
type fetcher struct{ verify, insecure *http.Client }

func newFetchClient() *fetcher {
	mk := func(skip bool) *http.Client {
		d := &net.Dialer{Timeout: 10 * time.Second}
		dial := func(ctx context.Context, network, address string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}

			if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.Unmap().IsLoopback()) {
				return nil, errNotLoopback
			}

			return d.DialContext(ctx, network, address)
		}

		return &http.Client{
			Timeout: 5 * time.Minute,
			Transport: &http.Transport{
				DialContext:     dial,
				TLSClientConfig: &tls.Config{InsecureSkipVerify: skip}, //nolint:gosec // verify-certificates=0
				Proxy:           nil,
			},
		}
	}

	return &fetcher{verify: mk(false), insecure: mk(true)}
}

func (f *fetcher) client(verify bool) *http.Client {
	if verify {
		return f.verify
	}

	return f.insecure
}

// lwpStatus words a transport error like LWP does ("500 Can't connect to host:port (reason)").
func lwpStatus(raw string, err error) string {
	host := raw
	if u, perr := url.Parse(raw); perr == nil {
		host = u.Host
	}

	reason := err.Error()
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		reason = opErr.Err.Error()
	}

	if strings.Contains(reason, "connection refused") {
		reason = "Connection refused"
	}

	return fmt.Sprintf("500 Can't connect to %s (%s)", host, reason)
}

// queryURLMetadata serves GET /nodes/{node}/query-url-metadata: a HEAD request to the URL,
// answering filename (Content-Disposition or the URL's last path segment), size and mimetype.
func (s *Server) queryURLMetadata(c *call) (any, *apiError) {
	if _, e := c.node(); e != nil {
		return nil, e
	}

	raw, ok := c.param("url")
	if !ok {
		return nil, paramErr1("url", "property is missing and it is not optional")
	}

	if !urlRE.MatchString(raw) {
		return nil, paramErr1("url", "value does not match the regex pattern")
	}

	verify, e := c.boolParam("verify-certificates", true)
	if e != nil {
		return nil, e
	}

	u, err := url.Parse(raw)
	if err != nil {
		return nil, errf("invalid server response: '400 URL must be absolute'")
	}

	req, _ := http.NewRequestWithContext(c.r.Context(), http.MethodHead, raw, nil)

	res, err := s.fetch.client(verify).Do(req)
	if err != nil {
		return nil, errf("invalid server response: '%s'", lwpStatus(raw, err))
	}

	_ = res.Body.Close()

	if res.StatusCode != http.StatusOK {
		return nil, errf("invalid server response: '%s'", res.Status)
	}

	out := map[string]any{}

	if _, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		out["filename"] = params["filename"]
	} else if name := path.Base(u.Path); u.Path != "" && name != "/" && name != "." {
		out["filename"] = name
	}

	if res.ContentLength > 0 {
		out["size"] = res.ContentLength
	}

	if ct := res.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := strings.Cut(ct, ";")
		out["mimetype"] = strings.TrimSpace(mt)
	}

	return out, nil
}

// downloadURL serves POST /nodes/{node}/storage/{storage}/download-url with PVE's checks; a
// "download" task fetches the URL into memory and creates the volume <storage>:<content>/<file>.
func (s *Server) downloadURL(c *call) (any, *apiError) {
	missing := map[string]string{}
	for _, p := range []string{"url", "content", "filename"} {
		if _, ok := c.param(p); !ok {
			missing[p] = "property is missing and it is not optional"
		}
	}

	if len(missing) > 0 {
		return nil, paramErr(missing)
	}

	raw, _ := c.param("url")
	content, _ := c.param("content")
	filename, _ := c.param("filename")
	checksum, hasSum := c.param("checksum")
	algo, hasAlgo := c.param("checksum-algorithm")
	compression, hasComp := c.param("compression")

	switch {
	case !urlRE.MatchString(raw):
		return nil, paramErr1("url", "value does not match the regex pattern")
	case !slices.Contains([]string{"iso", "vztmpl", "import"}, content):
		return nil, paramErr1("content", "value '"+content+"' does not have a value in the enumeration 'iso, vztmpl, import'")
	case hasSum && !hasAlgo:
		return nil, paramErr1("checksum-algorithm", "missing property - 'checksum' requires this property")
	case hasAlgo && !hasSum:
		return nil, paramErr1("checksum", "missing property - 'checksum-algorithm' requires this property")
	case hasAlgo && checksumAlgos[algo] == nil:
		return nil, paramErr1("checksum-algorithm", "value '"+algo+"' does not have a value in the enumeration 'md5, sha1, sha224, sha256, sha384, sha512'")
	case hasComp && !slices.Contains(compressions, compression):
		return nil, paramErr1("compression", "value '"+compression+"' does not have a value in the enumeration '"+strings.Join(compressions, ", ")+"'")
	}

	verify, e := c.boolParam("verify-certificates", true)
	if e != nil {
		return nil, e
	}

	s.mu.Lock()
	node, st, e := s.lookupStorage(c)
	s.mu.Unlock()

	if e != nil {
		return nil, e
	}

	if !st.fileBased {
		return nil, errf("can't upload to storage type '%s', not a file based storage!", st.cfg.Type)
	}

	if !st.supports(content) {
		return nil, errf("storage '%s' is not configured for content-type '%s'", st.cfg.ID, content)
	}

	filename = unsafeCharRE.ReplaceAllString(path.Base(strings.ReplaceAll(filename, "\\", "/")), "_")

	format, e := downloadFormat(content, filename)
	if e != nil {
		return nil, e
	}

	vol := &volume{name: content + "/" + filename, content: content, format: format}
	dest := st.path(vol)
	storeID := st.cfg.ID

	return s.startTask(c, node, "download", encodeText(filename), func(r *taskRun) error {
		r.logf("downloading %s to %s", raw, dest)

		if hasComp && content != "iso" {
			return fmt.Errorf("decompression not supported for %s", content)
		}

		s.mu.Lock()
		_, exists := s.storageOn(node, storeID).volumes[vol.name]
		s.mu.Unlock()

		if exists {
			return fmt.Errorf("refusing to override existing file '%s'", dest)
		}

		data, err := s.fetchURL(raw, verify)
		if err != nil {
			return err
		}

		r.logf("download of '%s' to '%s' finished", raw, dest)

		if hasSum {
			h := checksumAlgos[algo]()
			h.Write(data)

			if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, checksum) {
				return fmt.Errorf("checksum mismatch: got '%s' != expect '%s'", got, checksum)
			}

			r.logf("%s checksum verified", algo)
		}

		if hasComp {
			if data, err = decompress(compression, data); err != nil {
				return err
			}

			r.logf("decompressing %s to %s", dest+"."+compression, dest)
		}

		vol.data, vol.file, vol.size, vol.ctime = data, int64(len(data)), int64(len(data)), time.Now().Unix()

		s.mu.Lock()
		defer s.mu.Unlock()

		sto := s.storageOn(node, storeID)
		if _, exists := sto.volumes[vol.name]; exists {
			return fmt.Errorf("refusing to override existing file '%s'", dest)
		}

		sto.volumes[vol.name] = vol

		return nil
	}, nil), nil
}

// downloadFormat checks the file name's extension for the content type, like PVE.
func downloadFormat(content, filename string) (string, *apiError) {
	switch content {
	case "iso":
		if !isoExtRE.MatchString(filename) {
			return "", paramErr1("filename", "wrong file extension")
		}

		return "iso", nil
	case "vztmpl":
		if !vztmplExtRE.MatchString(filename) {
			return "", paramErr1("filename", "wrong file extension")
		}

		return "tgz", nil
	default:
		m := importExtRE.FindStringSubmatch(filename)
		if m == nil {
			return "", paramErr1("filename", "invalid filename or wrong extension")
		}

		return m[1], nil
	}
}

func (s *Server) fetchURL(raw string, verify bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("download failed - %w", err)
	}

	res, err := s.fetch.client(verify).Do(req)
	if err != nil {
		return nil, fmt.Errorf("download failed - %s", lwpStatus(raw, err))
	}
	defer func() { _ = res.Body.Close() }()

	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download failed - %s", res.Status)
	}

	data, err := io.ReadAll(io.LimitReader(res.Body, maxDownloadBytes+1))
	if err != nil {
		return nil, fmt.Errorf("download failed - %w", err)
	}

	if len(data) > maxDownloadBytes {
		return nil, errors.New("download failed - file too large for the fake (4 GiB)")
	}

	return data, nil
}

func decompress(algo string, data []byte) ([]byte, error) {
	var r io.Reader

	switch algo {
	case "gz":
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("decompressing gz failed - %w", err)
		}

		r = zr
	case "bz2":
		r = bzip2.NewReader(bytes.NewReader(data))
	default:
		return nil, fmt.Errorf("no decompression method found (the fake decompresses gz and bz2 only, not %s)", algo)
	}

	out, err := io.ReadAll(io.LimitReader(r, maxDownloadBytes))
	if err != nil {
		return nil, fmt.Errorf("decompressing %s failed - %w", algo, err)
	}

	return out, nil
}
