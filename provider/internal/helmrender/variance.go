package helmrender

import (
	"maps"
	"path"
	"slices"
	"strings"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
	"helm.sh/helm/v3/pkg/chart"
)

// varying lists the template functions whose result can differ between two renders of the same
// inputs in one process: the clock (sprig's date functions read it when not given a time),
// randomness (certificates and keys carry random serials and the time), salted hashes, and map
// order (sprig's keys and values are unsorted). `tpl` renders a
// string only known while rendering, and an `include` of a computed name calls a template only
// known then: both count as varying too.
var varying = map[string]bool{
	"now": true, "ago": true, "durationRound": true, "date": true, "dateInZone": true, "date_in_zone": true,
	"htmlDate": true, "htmlDateInZone": true,
	"randAlpha": true, "randAlphaNum": true, "randAscii": true, "randBytes": true, "randInt": true,
	"randNumeric": true, "shuffle": true, "uuidv4": true,
	"genCA": true, "genCAWithKey": true, "genPrivateKey": true, "genSelfSignedCert": true,
	"genSelfSignedCertWithKey": true, "genSignedCert": true, "genSignedCertWithKey": true,
	"bcrypt": true, "htpasswd": true, "encryptAES": true,
	"keys": true, "values": true,
	"tpl": true,
}

// steady is every other function a Helm template can call: text/template's builtins, sprig's
// (less env and expandenv, which Helm removes) and Helm's own. `lookup` answers nothing in a
// client-only render and `getHostByName` answers "" while DNS is off (it is): both are steady. A
// function in neither list is unknown and counts as varying.
var steady = func() map[string]bool {
	s := map[string]bool{}

	for _, f := range []string{
		"and", "call", "html", "index", "slice", "js", "len", "not", "or", "print", "printf", "println",
		"urlquery", "eq", "ge", "gt", "le", "lt", "ne",
		"toToml", "fromToml", "toYaml", "toYamlPretty", "fromYaml", "fromYamlArray", "toJson", "fromJson",
		"fromJsonArray", "include", "required", "lookup", "fail",
	} {
		s[f] = true
	}

	for f := range sprig.TxtFuncMap() {
		s[f] = f != "env" && f != "expandenv"
	}

	for f := range varying {
		delete(s, f)
	}

	return s
}()

// templateUse is what one template (a file's body or a defined name) does: whether it calls a
// varying function itself, which templates it calls by a constant name, and whether it may call
// templates it does not name (tpl, or an include of a computed name).
type templateUse struct {
	varies, open bool
	calls        []string
}

func (u *templateUse) node(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				u.node(c)
			}
		}
	case *parse.ActionNode:
		u.node(n.Pipe)
	case *parse.IfNode:
		u.branch(&n.BranchNode)
	case *parse.RangeNode:
		u.branch(&n.BranchNode)
	case *parse.WithNode:
		u.branch(&n.BranchNode)
	case *parse.TemplateNode:
		u.calls = append(u.calls, n.Name)
		u.node(n.Pipe)
	case *parse.PipeNode:
		if n != nil {
			for _, c := range n.Cmds {
				u.node(c)
			}
		}
	case *parse.CommandNode:
		args := n.Args
		if len(args) >= 2 {
			if id, ok := args[0].(*parse.IdentifierNode); ok && id.Ident == "include" {
				if name, ok := args[1].(*parse.StringNode); ok {
					u.calls = append(u.calls, name.Text)
					args = args[2:]
				}
			}
		}

		for _, a := range args {
			u.node(a)
		}
	case *parse.ChainNode:
		u.node(n.Node)
	case *parse.IdentifierNode:
		if n.Ident == "include" || !steady[n.Ident] {
			u.varies = true // a varying or unknown function, or an include of a computed name
		}

		if n.Ident == "include" || n.Ident == "tpl" {
			u.open = true
		}
	}
}

func (u *templateUse) branch(b *parse.BranchNode) {
	u.node(b.Pipe)
	u.node(b.List)
	u.node(b.ElseList)
}

// chartTemplates returns a chart's templates and its subcharts', named as Helm's engine names
// them (the chart's full path joined with the file name).
func chartTemplates(c *chart.Chart, into map[string]*chart.File) {
	for _, t := range c.Templates {
		if t != nil {
			into[path.Join(c.ChartFullPath(), t.Name)] = t
		}
	}

	for _, d := range c.Dependencies() {
		chartTemplates(d, into)
	}
}

func isPartial(name string) bool { return strings.HasPrefix(path.Base(name), "_") }

// varyingTemplates finds, without rendering, the template files of a chart whose output can differ
// between two renders of the same inputs: the files that call a varying function (see varying),
// themselves or through the templates they include, however deep. It also returns every file
// a render of those needs: the files defining a template they reach (a name defined twice keeps
// both definers, so the same definition wins), and every file defining any template when one
// of them may call a template it does not name. ok is false when a template does not parse; the
// render reports that.
func varyingTemplates(c *chart.Chart) (varies, needed map[string]bool, ok bool) {
	files := map[string]*chart.File{}
	chartTemplates(c, files)

	uses := map[string][]*templateUse{} // a name defined in several files has several uses
	definers := map[string][]string{}
	defining := map[string]bool{} // the files that define a named template

	for name, f := range files {
		t := parse.New(name)
		t.Mode = parse.SkipFuncCheck

		trees := map[string]*parse.Tree{}
		if _, err := t.Parse(string(f.Data), "", "", trees); err != nil {
			return nil, nil, false
		}

		for tn, tree := range trees {
			u := &templateUse{}
			u.node(tree.Root)
			uses[tn] = append(uses[tn], u)
			definers[tn] = append(definers[tn], name)
			if tn != name {
				defining[name] = true
			}
		}
	}

	reach := func(from string) map[string]bool {
		seen := map[string]bool{}
		todo := []string{from}

		for len(todo) > 0 {
			n := todo[len(todo)-1]
			todo = todo[:len(todo)-1]

			if seen[n] {
				continue
			}

			seen[n] = true

			for _, u := range uses[n] {
				todo = append(todo, u.calls...)
			}
		}

		return seen
	}

	varies, needed = map[string]bool{}, map[string]bool{}

	for _, name := range slices.Sorted(maps.Keys(files)) {
		if isPartial(name) || strings.HasSuffix(name, "NOTES.txt") {
			continue
		}

		reached := reach(name)
		for n := range reached {
			if slices.ContainsFunc(uses[n], func(u *templateUse) bool { return u.varies }) {
				varies[name] = true
			}
		}

		if !varies[name] {
			continue
		}

		for n := range reached {
			for _, f := range definers[n] {
				needed[f] = true
			}

			if slices.ContainsFunc(uses[n], func(u *templateUse) bool { return u.open }) {
				maps.Copy(needed, defining)
			}
		}
	}

	return varies, needed, true
}

// withTemplates returns a shallow copy of a chart tree that keeps only the named templates (by
// the names chartTemplates gives); everything else (values, files, metadata) is shared.
func withTemplates(c *chart.Chart, keep map[string]bool) *chart.Chart {
	cp := *c
	cp.Templates = nil

	for _, t := range c.Templates {
		if t != nil && keep[path.Join(c.ChartFullPath(), t.Name)] {
			cp.Templates = append(cp.Templates, t)
		}
	}

	deps := make([]*chart.Chart, 0, len(c.Dependencies()))
	for _, d := range c.Dependencies() {
		deps = append(deps, withTemplates(d, keep))
	}

	cp.SetDependencies(deps...)

	return &cp
}
