// Package pveschema checks Proxmox VE API requests and responses against PVE's own API schema,
// vendored from api-viewer/apidata.js of github.com/proxmox/pve-docs (see README.md for the
// commits and internal/gen for regenerating the data files).
//
// Only the API subtrees the product and the lab use are vendored: /access/**, /pools/**,
// /storage/**, /cluster/mapping/**, /cluster/resources, /cluster/nextid, /cluster/status, /nodes,
// /nodes/{node}/status, /nodes/{node}/query-url-metadata, /nodes/{node}/qemu/**,
// /nodes/{node}/storage/**, /nodes/{node}/tasks/** and /version.
//
// The checks follow PVE::JSONSchema (pve-common): request parameters arrive as strings and are
// type checked the way PVE parses them, patterns are anchored, property strings
// ("key=value,key2=value2", the "format" objects) are parsed with their default key and key
// aliases. Error texts reuse PVE's wording where PVE has one.
package pveschema

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
)

//go:embed pve-8.4.json.gz pve-9.json.gz
var dataFS embed.FS

// versions maps the names Load accepts to their data file.
var versions = map[string]string{
	"8.4": "pve-8.4.json.gz",
	"9":   "pve-9.json.gz",
}

// Versions lists the schema versions Load accepts, oldest first.
func Versions() []string {
	v := make([]string, 0, len(versions))
	for k := range versions {
		v = append(v, k)
	}

	sort.Strings(v)

	return v
}

// Source names where a vendored schema comes from.
type Source struct {
	Repository string `json:"repository"`
	File       string `json:"file"`
	Commit     string `json:"commit"`
	Date       string `json:"date"`
	// Package is the pve-docs package version of the commit (debian/changelog).
	Package string `json:"package"`
	Version string `json:"version"`
}

// Schema is one PVE version's API schema.
type Schema struct {
	Source Source
	// endpoints by template path, then method.
	endpoints map[string]map[string]*method
	templates [][]string
}

type method struct {
	name     string
	template string
	params   *prop
	returns  *prop
	// perms is the method's "permissions" object as PVE's schema has it (nil when absent).
	perms      map[string]any
	allowToken bool
}

var (
	loadMu sync.Mutex
	loaded = map[string]*Schema{}
)

// Load returns the schema of version (one of Versions()). Schemas are parsed once and shared;
// a *Schema is safe for concurrent use.
func Load(version string) (*Schema, error) {
	file, ok := versions[version]
	if !ok {
		return nil, fmt.Errorf("pveschema: unknown version %q (have %s)", version, strings.Join(Versions(), ", "))
	}

	loadMu.Lock()
	defer loadMu.Unlock()

	if s := loaded[version]; s != nil {
		return s, nil
	}

	raw, err := dataFS.ReadFile(file)
	if err != nil {
		return nil, err
	}

	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("pveschema: %s: %w", file, err)
	}

	js, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("pveschema: %s: %w", file, err)
	}

	var doc struct {
		Source Source                               `json:"source"`
		Paths  map[string]map[string]map[string]any `json:"paths"`
	}

	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("pveschema: %s: %w", file, err)
	}

	s := &Schema{Source: doc.Source, endpoints: map[string]map[string]*method{}}

	for path, methods := range doc.Paths {
		ms := map[string]*method{}

		for name, info := range methods {
			m := &method{name: name, template: path}

			if p, ok := info["parameters"].(map[string]any); ok {
				if m.params, err = buildProp(p); err != nil {
					return nil, fmt.Errorf("pveschema: %s %s parameters: %w", name, path, err)
				}
			}

			if r, ok := info["returns"].(map[string]any); ok {
				if m.returns, err = buildProp(r); err != nil {
					return nil, fmt.Errorf("pveschema: %s %s returns: %w", name, path, err)
				}
			}

			if p, ok := info["permissions"].(map[string]any); ok {
				m.perms = p
			}

			if a, ok := info["allowtoken"].(float64); ok && a != 0 {
				m.allowToken = true
			}

			ms[name] = m
		}

		s.endpoints[path] = ms
		s.templates = append(s.templates, splitPath(path))
	}

	fillTypetexts(s)

	sort.Slice(s.templates, func(i, j int) bool {
		return strings.Join(s.templates[i], "/") < strings.Join(s.templates[j], "/")
	})

	loaded[version] = s

	return s, nil
}

// Endpoints lists every vendored endpoint as "METHOD /template", sorted.
func (s *Schema) Endpoints() []string {
	var out []string

	for path, ms := range s.endpoints {
		for m := range ms {
			out = append(out, m+" "+path)
		}
	}

	sort.Strings(out)

	return out
}

// Match finds the template path of a concrete path, given as sent (URL-escaped segments, with or
// without the /api2/json prefix; an unescaped path works while no variable contains a "/") (e.g. /nodes/pve1/qemu/100/config →
// /nodes/{node}/qemu/{vmid}/config) and its path variables. Literal segments win over
// variables.
func (s *Schema) Match(path string) (string, map[string]string, bool) {
	segs := splitPath(path)
	best, bestLit := -1, -1

	for i, t := range s.templates {
		if len(t) != len(segs) {
			continue
		}

		lit, ok := 0, true

		for j, p := range t {
			if isVar(p) {
				continue
			}

			if p != segs[j] {
				ok = false
				break
			}

			lit++
		}

		if ok && lit > bestLit {
			best, bestLit = i, lit
		}
	}

	if best < 0 {
		return "", nil, false
	}

	vars := map[string]string{}
	for j, p := range s.templates[best] {
		if isVar(p) {
			vars[strings.Trim(p, "{}")] = segs[j]
		}
	}

	return "/" + strings.Join(s.templates[best], "/"), vars, true
}

func isVar(seg string) bool { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }

func splitPath(p string) []string {
	p = strings.TrimPrefix(p, "/api2/json")

	var segs []string

	for _, s := range strings.Split(p, "/") {
		if s == "" {
			continue
		}

		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}

		segs = append(segs, s)
	}

	return segs
}

// Violation is one broken rule.
type Violation struct {
	// Field is the parameter or returned property, with a path for nested values
	// ("net0.model", "data[2].vmid"); empty for the endpoint itself.
	Field string
	// Rule says what is wrong, in PVE's wording where it has one.
	Rule string
}

func (v Violation) String() string {
	if v.Field == "" {
		return v.Rule
	}

	return v.Field + ": " + v.Rule
}

// Error lists the violations of one request or response.
type Error struct {
	// Kind is "request" or "response".
	Kind   string
	Method string
	// Endpoint is the template path (e.g. /nodes/{node}/qemu/{vmid}/config), or the request's
	// path when no template matches.
	Endpoint   string
	Violations []Violation
}

func (e *Error) Error() string {
	vs := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		vs[i] = v.String()
	}

	return fmt.Sprintf("%s %s %s: %s", e.Kind, e.Method, e.Endpoint, strings.Join(vs, "; "))
}

func (s *Schema) endpoint(kind, meth, path string) (*method, map[string]string, *Error) {
	tmpl, vars, ok := s.Match(path)
	if !ok {
		return nil, nil, &Error{Kind: kind, Method: meth, Endpoint: path,
			Violations: []Violation{{Rule: "no such API path in PVE " + s.Source.Version}}}
	}

	m := s.endpoints[tmpl][meth]
	if m == nil {
		have := make([]string, 0, len(s.endpoints[tmpl]))
		for k := range s.endpoints[tmpl] {
			have = append(have, k)
		}

		slices.Sort(have)

		return nil, nil, &Error{Kind: kind, Method: meth, Endpoint: tmpl,
			Violations: []Violation{{Rule: "method not defined (PVE " + s.Source.Version + " has " + strings.Join(have, ", ") + ")"}}}
	}

	return m, vars, nil
}

// fillTypetexts gives every use of a named format the typetext one of its uses has: PVE only
// documents the typetext of top-level parameters, but returned values (GET config) use the same
// named property-string formats.
func fillTypetexts(s *Schema) {
	tt := map[string]string{}

	walkAll(s, func(p *prop) {
		if p.format != "" && strings.Contains(p.typetext, "=") {
			tt[p.format] = p.typetext
		}
	})

	walkAll(s, func(p *prop) {
		if p.format != "" && p.typetext == "" {
			p.typetext = tt[p.format]
		}
	})
}

func walkAll(s *Schema, f func(*prop)) {
	seen := map[*prop]bool{}

	var walk func(p *prop)
	walk = func(p *prop) {
		if p == nil || seen[p] {
			return
		}

		seen[p] = true
		f(p)

		for _, m := range []map[string]*prop{p.properties, p.indexed, p.formatProps} {
			for _, sub := range m {
				walk(sub)
			}
		}

		walk(p.items)
		walk(p.additionalSchema)
	}

	for _, ms := range s.endpoints {
		for _, m := range ms {
			walk(m.params)
			walk(m.returns)
		}
	}
}

// Parameters lists the parameter names of a method (indexed ones as "net[n]"), path variables
// included, sorted; ok is false when path or method is unknown.
func (s *Schema) Parameters(method, path string) (names []string, ok bool) {
	m, _, e := s.endpoint("request", method, path)
	if e != nil || m.params == nil {
		return nil, e == nil
	}

	for k := range m.params.properties {
		names = append(names, k)
	}

	for k := range m.params.indexed {
		names = append(names, k+"[n]")
	}

	sort.Strings(names)

	return names, true
}

// Permissions is what PVE checks before it runs a method: the method's "permissions" object
// (e.g. {"check": ["perm", "/vms/{vmid}", ["VM.Audit"]]} or {"user": "all"}; nil when the schema
// has none, which PVE treats as root@pam only), whether API tokens may call it ("allowtoken"),
// the template path and the concrete path's variables. ok is false for an unknown path or
// method.
func (s *Schema) Permissions(method, path string) (perms map[string]any, allowToken bool, template string, vars map[string]string, ok bool) {
	m, vars, e := s.endpoint("request", method, path)
	if e != nil {
		return nil, false, "", nil, false
	}

	return m.perms, m.allowToken, m.template, vars, true
}
