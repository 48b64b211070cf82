package redact

import (
	"maps"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/textdiff"
	"go.yaml.in/yaml/v4"
)

// Diff is the unified diff of two renderings (from Config or Manifests), "" when they are the
// same; the header names them "a/<from>" and "b/<to>".
func Diff(a, b string, names ...string) (string, error) {
	from, to := "a", "b"
	if len(names) == 2 {
		from, to = "a/"+names[0], "b/"+names[1]
	}

	return textdiff.DiffWithCustomPaths(a, b, from, to)
}

// Change is one document of a machine configuration that differs between two renderings.
type Change struct {
	// Document names it: "v1alpha1", or its kind and name ("ResolverConfig", "UserVolumeConfig
	// longhorn").
	Document string
	// Added and Removed say the whole document comes or goes.
	Added, Removed bool
	// Fields are the changed fields.
	Fields []Field
}

// Field is one changed field: its path (".machine.network.nameservers"; a list as a whole) and,
// when short enough for one line, its old and new value in YAML flow style ("(none)" when absent).
type Field struct {
	Path, Old, New string
}

// String is ".machine.network.nameservers: [1.1.1.1] → [9.9.9.9]", or the path alone.
func (f Field) String() string {
	if f.Old == "" || f.New == "" {
		return f.Path
	}

	return f.Path + ": " + f.Old + " → " + f.New
}

// Paths are the changed fields' paths.
func (c Change) Paths() []string {
	out := make([]string, len(c.Fields))
	for i, f := range c.Fields {
		out[i] = f.Path
	}

	return out
}

// String is "ResolverConfig: .nameservers: [...] → [...]", "+ HostnameConfig" or "- HostnameConfig".
func (c Change) String() string {
	switch {
	case c.Added:
		return "+ " + c.Document
	case c.Removed:
		return "- " + c.Document
	}

	fields := make([]string, len(c.Fields))
	for i, f := range c.Fields {
		fields[i] = f.String()
	}

	return c.Document + ": " + strings.Join(fields, ", ")
}

// Changes lists the documents and fields that differ between two renderings of a machine
// configuration, in the order of b's documents (removed ones last).
func Changes(a, b string) ([]Change, error) {
	before, order, err := documents(a)
	if err != nil {
		return nil, err
	}

	after, afterOrder, err := documents(b)
	if err != nil {
		return nil, err
	}

	var out []Change

	for _, name := range afterOrder {
		old, ok := before[name]
		if !ok {
			out = append(out, Change{Document: name, Added: true})
			continue
		}

		if fields := changedFields(old, after[name], ""); len(fields) > 0 {
			out = append(out, Change{Document: name, Fields: fields})
		}
	}

	for _, name := range order {
		if _, ok := after[name]; !ok {
			out = append(out, Change{Document: name, Removed: true})
		}
	}

	return out, nil
}

// documents are a rendering's documents by name, and the names in order.
func documents(s string) (map[string]*yaml.Node, []string, error) {
	docs, err := decodeAll([]byte(s))
	if err != nil {
		return nil, nil, err
	}

	byName := map[string]*yaml.Node{}

	var order []string

	for _, d := range docs {
		obj := root(d)
		if obj == nil {
			continue
		}

		name := "v1alpha1"
		if kind := lookup(obj, "kind"); kind != nil {
			name = kind.Value
			if n := lookup(obj, "name"); n != nil && n.Kind == yaml.ScalarNode {
				name += " " + n.Value
			}
		}

		for byName[name] != nil { // two documents of one kind without names
			name += "'"
		}

		byName[name] = obj
		order = append(order, name)
	}

	return byName, order, nil
}

// changedFields are the fields under which a and b differ: mappings are compared key by key,
// anything else (scalars, lists) as a whole.
func changedFields(a, b *yaml.Node, at string) []Field {
	if a == nil || b == nil || a.Kind != yaml.MappingNode || b.Kind != yaml.MappingNode {
		if a != nil && b != nil && same(a, b) {
			return nil
		}

		return []Field{{Path: orRoot(at), Old: flow(a), New: flow(b)}}
	}

	av, bv := fields(a), fields(b)

	var out []Field

	for _, k := range slices.Sorted(maps.Keys(union(av, bv))) {
		out = append(out, changedFields(av[k], bv[k], at+"."+k)...)
	}

	return out
}

// maxValue is the longest value a Field shows: an installer image with its schematic id fits.
const maxValue = 120

// flow is n in YAML flow style on one line, "(none)" for nil, "" when longer than maxValue.
func flow(n *yaml.Node) string {
	if n == nil {
		return "(none)"
	}

	c := flowCopy(n)

	b, err := yaml.Marshal(c)
	if s := strings.TrimSpace(string(b)); err == nil && len(s) <= maxValue && !strings.Contains(s, "\n") {
		return s
	}

	return ""
}

// flowCopy is a copy of n with every collection in flow style.
func flowCopy(n *yaml.Node) *yaml.Node {
	c := *n
	if c.Kind == yaml.MappingNode || c.Kind == yaml.SequenceNode {
		c.Style = yaml.FlowStyle
	}

	c.Content = make([]*yaml.Node, len(n.Content))
	for i, e := range n.Content {
		c.Content[i] = flowCopy(e)
	}

	return &c
}

func orRoot(p string) string {
	if p == "" {
		return "."
	}

	return p
}

func fields(m *yaml.Node) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		out[m.Content[i].Value] = m.Content[i+1]
	}

	return out
}

func union(a, b map[string]*yaml.Node) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}

	for k := range b {
		out[k] = true
	}

	return out
}

func same(a, b *yaml.Node) bool {
	x, errA := yaml.Marshal(a)
	y, errB := yaml.Marshal(b)

	return errA == nil && errB == nil && string(x) == string(y)
}

// Summary is one line of Changes: "ResolverConfig: .nameservers; v1alpha1: .machine.install.image".
func Summary(changes []Change) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = c.String()
	}

	return strings.Join(parts, "; ")
}
