// Package factoryfake is the lab's stand-in for the Talos Image Factory, on loopback. It
// answers `POST /schematics` with the id the real factory computes (its own schematic package),
// and image URLs (`/image/<schematic>/<version>/<file>`) with a small placeholder file, so the
// proxmoxve download resources have something to fetch.
package factoryfake

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
)

// Server is a running Image Factory stand-in.
type Server struct {
	url  string
	srv  *http.Server
	done chan struct{}

	mu          sync.Mutex
	schematics  map[string][]byte
	requests    []string
	unpublished map[string][]string // official extensions a Talos version lacks (Unpublish)
}

// Start listens on addr (a loopback address such as "127.0.0.1:0") until ctx ends or Close.
func Start(ctx context.Context, addr string) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}

	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("the image factory stand-in listens on loopback only, not %q", addr)
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}

	s := &Server{
		url:        "http://" + ln.Addr().String(),
		done:       make(chan struct{}),
		schematics: map[string][]byte{},
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}

	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()

	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()

	return s, nil
}

// URL is the factory URL, e.g. http://127.0.0.1:41234.
func (s *Server) URL() string { return s.url }

// Close stops the server.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done

	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}

	return err
}

// Schematics returns the ids registered so far.
func (s *Server) Schematics() []string {
	s.mu.Lock()
	defer s.mu.Unlock()

	ids := make([]string, 0, len(s.schematics))
	for id := range s.schematics {
		ids = append(ids, id)
	}

	return ids
}

// Requests returns "METHOD path" for every request served.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()

	return append([]string{}, s.requests...)
}

// ServeHTTP implements the factory's API subset.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.mu.Unlock()

	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/schematics":
		s.createSchematic(w, r)
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.HasPrefix(r.URL.Path, "/image/"):
		s.image(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/version/") && strings.HasSuffix(r.URL.Path, "/extensions/official"):
		s.extensions(w, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/version/"), "/extensions/official"))
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/schematics/"):
		s.mu.Lock()
		body, ok := s.schematics[strings.TrimPrefix(r.URL.Path, "/schematics/")]
		s.mu.Unlock()

		if !ok {
			http.Error(w, "schematic not found", http.StatusNotFound)
			return
		}

		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(body)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

func (s *Server) createSchematic(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}

	cfg, err := schematic.Unmarshal(body)
	if err != nil {
		http.Error(w, "invalid schematic: "+err.Error(), http.StatusBadRequest)
		return
	}

	id, err := cfg.ID()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}

	canonical, _ := cfg.Marshal()

	s.mu.Lock()
	s.schematics[id] = canonical
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

// image serves /image/<schematic>/<version>/<file> for registered schematics.
func (s *Server) image(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/image/"), "/")
	if len(parts) != 3 || !strings.HasPrefix(parts[1], "v") {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}

	if !Released(parts[1]) {
		http.Error(w, "version "+parts[1]+" not found", http.StatusNotFound)
		return
	}

	s.mu.Lock()
	registered, known := s.schematics[parts[0]]
	s.mu.Unlock()

	if !known {
		http.Error(w, "schematic not found", http.StatusNotFound)
		return
	}

	if missing := s.missingExtension(registered, parts[1]); missing != "" {
		http.Error(w, extensionNotFound(parts[1], missing), http.StatusNotFound)
		return
	}

	body := Image(parts[0], parts[1], parts[2], schematicExtensions(registered)...)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))

	if r.Method == http.MethodHead {
		return
	}

	_, _ = w.Write(body)
}

// Image is the placeholder served for an image URL, deterministic: 4 KiB of text naming the
// schematic, version, file and the schematic's extensions, after a valid qcow2 header with a 1 GiB
// virtual size for `.qcow2` (what Proxmox imports), gzipped for `.gz`.
func Image(schematicID, version, file string, extensions ...string) []byte {
	head := fmt.Sprintf("talos-proxmox lab image\nschematic %s\nversion %s\nfile %s\n", schematicID, version, file)
	for _, e := range extensions {
		head += "extension " + e + "\n"
	}
	body := make([]byte, 4096)
	copy(body, head)

	switch {
	case strings.HasSuffix(file, ".qcow2"):
		// The text after the header tells the lab which version and schematic a VM boots.
		return append(pvefake.QCOW2Image(1<<30), body...)
	case strings.HasSuffix(file, ".gz"):
		var buf bytes.Buffer

		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.ModTime = time.Unix(0, 0)
		_, _ = zw.Write(body)
		_ = zw.Close()

		return buf.Bytes()
	}

	return body
}
