package pveschema

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// prop is one schema node: a parameter, a returned value or a property-string key.
type prop struct {
	typ        string
	optional   bool
	hasDefault bool
	enum       []string
	pattern    *regexp.Regexp
	min, max   *float64
	minLength  *int
	maxLength  *int
	// format is a named format ("pve-vmid"); formatProps a property-string format.
	format      string
	formatProps map[string]*prop
	typetext    string

	properties map[string]*prop
	// indexed holds the "net[n]" style properties by their base name ("net").
	indexed map[string]*prop
	// maxIndex is the highest n of an indexed property (-1 if unknown).
	maxIndex int
	// additional: additionalProperties was 1; additionalSchema: it was a schema.
	additional       bool
	additionalSchema *prop
	// noAdditional: additionalProperties was given as 0.
	noAdditional bool
	items        *prop

	// check is a value check of a key of a named property-string format (see typetextFormat).
	check func(string) error

	alias, keyAlias string
	defaultKey      bool
}

func buildProp(m map[string]any) (*prop, error) {
	p := &prop{maxIndex: -1}

	p.typ, _ = m["type"].(string)
	p.optional = truthy(m["optional"])
	_, p.hasDefault = m["default"]
	p.typetext, _ = m["typetext"].(string)
	p.alias, _ = m["alias"].(string)
	p.keyAlias, _ = m["keyAlias"].(string)
	p.defaultKey = truthy(m["default_key"])

	if e, ok := m["enum"].([]any); ok {
		for _, v := range e {
			p.enum = append(p.enum, fmt.Sprint(v))
		}
	}

	if s, ok := m["pattern"].(string); ok {
		re, err := perlRegexp(s)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", s, err)
		}

		p.pattern = re
	}

	p.min = number(m["minimum"])
	p.max = number(m["maximum"])

	if f := number(m["minLength"]); f != nil {
		n := int(*f)
		p.minLength = &n
	}

	if f := number(m["maxLength"]); f != nil {
		n := int(*f)
		p.maxLength = &n
	}

	if f := number(m["x-max-index"]); f != nil {
		p.maxIndex = int(*f)
	}

	switch f := m["format"].(type) {
	case string:
		p.format = f
	case map[string]any:
		props, _, err := buildProps(f)
		if err != nil {
			return nil, fmt.Errorf("format: %w", err)
		}

		p.formatProps = props
	}

	if props, ok := m["properties"].(map[string]any); ok {
		var err error
		if p.properties, p.indexed, err = buildProps(props); err != nil {
			return nil, err
		}
	}

	switch a := m["additionalProperties"].(type) {
	case map[string]any:
		sub, err := buildProp(a)
		if err != nil {
			return nil, fmt.Errorf("additionalProperties: %w", err)
		}

		p.additional, p.additionalSchema = true, sub
	case nil:
	default:
		p.additional = truthy(a)
		p.noAdditional = !p.additional
	}

	if it, ok := m["items"].(map[string]any); ok {
		sub, err := buildProp(it)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}

		p.items = sub
	}

	return p, nil
}

func buildProps(m map[string]any) (map[string]*prop, map[string]*prop, error) {
	props := map[string]*prop{}
	indexed := map[string]*prop{}

	for k, v := range m {
		sm, ok := v.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("property %s: not an object", k)
		}

		sub, err := buildProp(sm)
		if err != nil {
			return nil, nil, fmt.Errorf("property %s: %w", k, err)
		}

		if base, ok := strings.CutSuffix(k, "[n]"); ok {
			indexed[base] = sub
		} else {
			props[k] = sub
		}
	}

	return props, indexed, nil
}

// lookup finds the schema of a property name, resolving indexed names ("net3" → net[n]).
// ok is false for unknown names; rule is set when the name is an indexed one out of range.
func (p *prop) lookup(name string) (sub *prop, rule string, ok bool) {
	if s := p.properties[name]; s != nil {
		return s, "", true
	}

	base := strings.TrimRightFunc(name, func(r rune) bool { return r >= '0' && r <= '9' })
	if base == name || len(p.indexed) == 0 {
		return nil, "", false
	}

	s := p.indexed[base]
	if s == nil {
		return nil, "", false
	}

	digits := name[len(base):]
	if len(digits) > 1 && digits[0] == '0' {
		return nil, "", false
	}

	n, err := strconv.Atoi(digits)
	if err != nil {
		return nil, "", false
	}

	if s.maxIndex >= 0 && n > s.maxIndex {
		return s, fmt.Sprintf("index %d out of range (%s[n] allows n from 0 to %d)", n, base, s.maxIndex), true
	}

	return s, "", true
}

func truthy(v any) bool {
	switch t := v.(type) {
	case bool:
		return t
	case float64:
		return t != 0
	case string:
		return t != "" && t != "0"
	}

	return false
}

func number(v any) *float64 {
	switch t := v.(type) {
	case float64:
		return &t
	case string:
		f, err := strconv.ParseFloat(t, 64)
		if err == nil {
			return &f
		}
	}

	return nil
}

// perlRegexp compiles a PVE (Perl) pattern as PVE applies it: anchored, m/^$pattern$/.
// Perl-only syntax is rewritten: stringified flags "(?^:" and "(?^i:", atomic groups "(?>"
// (as plain groups: they only change backtracking), "{,n}" quantifiers (Perl >= 5.34),
// "\z"/"\Z", and counts above RE2's 1000.
func perlRegexp(s string) (*regexp.Regexp, error) {
	r := s
	r = strings.ReplaceAll(r, "(?^:", "(?:")
	r = strings.ReplaceAll(r, "(?^i:", "(?i:")
	r = strings.ReplaceAll(r, "(?>", "(?:")
	r = strings.ReplaceAll(r, `\Z`, `$`)
	r = strings.ReplaceAll(r, `\z`, `$`)
	r = braceQuant.ReplaceAllString(r, "{0,$1}")
	// RE2 allows counts up to 1000; a larger upper bound becomes unbounded (approximate).
	r = bigQuant.ReplaceAllStringFunc(r, func(q string) string {
		m := bigQuant.FindStringSubmatch(q)
		if n, _ := strconv.Atoi(m[2]); n > 1000 {
			return "{" + m[1] + ",}"
		}

		return q
	})

	return regexp.Compile(`^(?:` + r + `)$`)
}

var (
	braceQuant = regexp.MustCompile(`\{,(\d+)\}`)
	bigQuant   = regexp.MustCompile(`\{(\d+),(\d+)\}`)
)
