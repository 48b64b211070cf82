// Command gen converts Proxmox VE's api-viewer/apidata.js (repository proxmox/pve-docs) into the
// trimmed, gzip-compressed JSON schema files package pveschema embeds.
//
// Regenerate a file from a local apidata.js (run in lab/pveschema):
//
//	git -C pve-docs show <commit>:api-viewer/apidata.js > /tmp/apidata.js
//	go run ./internal/gen -in /tmp/apidata.js -out pve-9.json.gz \
//		-version 9 -package 9.1.3 -commit <commit> -date 2026-04-30
//
// then update the table in README.md. The output is deterministic (sorted keys, no gzip
// timestamp), so an unchanged input gives an unchanged file.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// keepPrefixes are the API subtrees vendored: every endpoint lab/pvefake serves and what the
// product and bpg's client call, plus /access/**.
var keepPrefixes = []string{
	"/access",
	"/pools",
	"/storage",
	"/cluster/mapping",
	"/nodes/{node}/qemu",
	"/nodes/{node}/storage",
	"/nodes/{node}/tasks",
}

// keepExact are single endpoints vendored without their subtrees.
var keepExact = []string{
	"/version",
	"/cluster",
	"/cluster/resources",
	"/cluster/nextid",
	"/cluster/status",
	"/nodes",
	"/nodes/{node}",
	"/nodes/{node}/status",
	"/nodes/{node}/query-url-metadata",
}

// dropKeys are documentation-only schema keys stripped from the vendored data.
var dropKeys = map[string]bool{
	"description":         true,
	"verbose_description": true,
	"format_description":  true,
	"title":               true,
	"renderer":            true,
	"links":               true,
	"print_width":         true,
}

// methodKeys are the method-level keys kept.
var methodKeys = []string{"parameters", "returns", "permissions", "allowtoken", "protected"}

// maxIndex is the highest index of qemu-server's indexed options whose description does not
// say "(n is 0 to N)": MAX_NETS, MAX_HOSTPCI_DEVICES, MAX_NUMA_NODES, MAX_UNUSED_DISKS,
// MAX_USB_DEVICES (14 for machine >= 7.1) and MAX_VIRTIOFS in qemu-server.
var maxIndex = map[string]int{
	"net[n]": 31, "ipconfig[n]": 31, "hostpci[n]": 15, "numa[n]": 7, "unused[n]": 255,
	"usb[n]": 14, "virtiofs[n]": 9,
}

var nRangeRE = regexp.MustCompile(`\(n is 0 to (\d+)`)

type node struct {
	Path     string                    `json:"path"`
	Info     map[string]map[string]any `json:"info"`
	Children []node                    `json:"children"`
}

func main() {
	in := flag.String("in", "", "path of apidata.js")
	out := flag.String("out", "", "output .json.gz")
	version := flag.String("version", "", "schema name, e.g. 8.4 or 9")
	pkg := flag.String("package", "", "pve-docs package version (debian/changelog)")
	commit := flag.String("commit", "", "pve-docs commit")
	date := flag.String("date", "", "commit date (YYYY-MM-DD)")
	flag.Parse()

	if *in == "" || *out == "" || *version == "" {
		log.Fatal("usage: gen -in apidata.js -out pve-X.json.gz -version X [-package P -commit C -date D]")
	}

	src, err := os.ReadFile(*in)
	if err != nil {
		log.Fatal(err)
	}

	tree, err := parseAPIData(src)
	if err != nil {
		log.Fatal(err)
	}

	paths := map[string]map[string]any{}

	var walk func(n node)
	walk = func(n node) {
		if keep(n.Path) && len(n.Info) > 0 {
			methods := map[string]any{}

			for m, info := range n.Info {
				kept := map[string]any{}

				for _, k := range methodKeys {
					if v, ok := info[k]; ok {
						kept[k] = strip(v, "")
					}
				}

				methods[m] = kept
			}

			paths[n.Path] = methods
		}

		for _, c := range n.Children {
			walk(c)
		}
	}

	for _, n := range tree {
		walk(n)
	}

	doc := map[string]any{
		"source": map[string]string{
			"repository": "https://github.com/proxmox/pve-docs",
			"file":       "api-viewer/apidata.js",
			"commit":     *commit,
			"date":       *date,
			"package":    *pkg,
			"version":    *version,
		},
		"paths": paths,
	}

	js, err := json.Marshal(doc)
	if err != nil {
		log.Fatal(err)
	}

	var buf bytes.Buffer

	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		log.Fatal(err)
	}

	if _, err := zw.Write(js); err != nil {
		log.Fatal(err)
	}

	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}

	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}

	fmt.Printf("%s: %d endpoints, %d bytes JSON, %d bytes gzip\n", *out, len(paths), len(js), buf.Len())
}

func keep(p string) bool {
	for _, e := range keepExact {
		if p == e {
			return true
		}
	}

	for _, pre := range keepPrefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}

	return false
}

// strip drops documentation keys recursively and records the index range of qemu's indexed
// options ("net[n]") as "x-max-index", from their description or qemu-server's constants.
func strip(v any, name string) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}

		if strings.HasSuffix(name, "[n]") {
			desc, _ := t["description"].(string)
			if m := nRangeRE.FindStringSubmatch(desc); m != nil {
				n, _ := strconv.Atoi(m[1])
				out["x-max-index"] = n
			} else if n, ok := maxIndex[name]; ok {
				out["x-max-index"] = n
			}
		}

		for k, e := range t {
			if dropKeys[k] {
				if _, isStr := e.(string); isStr || k == "links" {
					continue
				}
			}

			out[k] = strip(e, k)
		}

		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = strip(e, "")
		}

		return out
	default:
		return v
	}
}

// parseAPIData extracts the array of `const apiSchema = [...];` and parses it as JSON. The file
// PVE generates is JSON inside a JS statement; trailing commas (the one JS-only construct a
// hand edit could bring in) are removed before parsing.
func parseAPIData(src []byte) ([]node, error) {
	i := bytes.IndexByte(src, '[')
	j := bytes.LastIndexByte(src, ']')

	if i < 0 || j < i {
		return nil, errors.New("no array literal in apidata.js")
	}

	if pre := strings.TrimSpace(string(src[:i])); !strings.HasSuffix(pre, "=") {
		return nil, fmt.Errorf("unexpected text before the array: %q", pre)
	}

	body := src[i : j+1]

	var tree []node
	if err := json.Unmarshal(body, &tree); err == nil {
		return tree, nil
	}

	if err := json.Unmarshal(dropTrailingCommas(body), &tree); err != nil {
		return nil, fmt.Errorf("apidata.js array is not JSON: %w", err)
	}

	return tree, nil
}

// dropTrailingCommas removes commas directly before a closing ] or } outside strings.
func dropTrailingCommas(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inStr, esc := false, false

	for k := 0; k < len(b); k++ {
		c := b[k]

		if inStr {
			out = append(out, c)

			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}

			continue
		}

		if c == '"' {
			inStr = true
		}

		if c == ',' {
			n := k + 1
			for n < len(b) && (b[n] == ' ' || b[n] == '\n' || b[n] == '\t' || b[n] == '\r') {
				n++
			}

			if n < len(b) && (b[n] == ']' || b[n] == '}') {
				continue
			}
		}

		out = append(out, c)
	}

	return out
}
