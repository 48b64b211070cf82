package pveschema

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// CheckRequest checks a request as PVE's API handler would before running it: the path matches
// a template, the method exists, and params (the query and form parameters) together with the
// path variables pass the method's parameter schema. As pve-http-server decodes parameters, an
// empty value counts as not given; a parameter repeating a path variable must have its value.
// The error is an *Error.
func (s *Schema) CheckRequest(method, path string, params map[string][]string) error {
	m, vars, e := s.endpoint("request", method, path)
	if e != nil {
		return e
	}

	var vs []Violation

	add := func(field, format string, args ...any) {
		vs = append(vs, Violation{Field: field, Rule: fmt.Sprintf(format, args...)})
	}

	schema := m.params
	if schema == nil {
		schema = &prop{}
	}

	values := map[string]string{}

	for k, v := range vars {
		values[k] = v
	}

	given := make([]string, 0, len(params))
	for k := range params {
		given = append(given, k)
	}

	sort.Strings(given)

	for _, k := range given {
		// pve-http-server's decode_urlencoded: "k=" and "k" are undef, i.e. not given.
		var vals []string

		for _, v := range params[k] {
			if v != "" {
				vals = append(vals, v)
			}
		}

		if len(vals) == 0 {
			continue
		}

		if len(vals) > 1 {
			// decode_urlencoded makes an array of a repeated key: only array types take it.
			sub, _, _ := schema.lookup(k)
			if sub == nil || sub.typ != "array" {
				add(k, "given %d times (PVE makes an array of it, which type '%s' does not take)", len(vals), typeOf(sub))
				continue
			}
		}

		v := vals[len(vals)-1]

		// pve-manager's PVE::HTTPServer: a parameter repeating a path variable must be equal.
		if pv, ok := vars[k]; ok {
			if pv != v {
				add(k, "duplicate parameter (already defined in URI) with conflicting values!")
			}

			continue
		}

		values[k] = v
	}

	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}

	sort.Strings(names)

	for _, k := range names {
		sub, rule, ok := schema.lookup(k)
		if !ok {
			if !schema.additional {
				add(k, "property is not defined in schema and the schema does not allow additional properties")
			}

			continue
		}

		if rule != "" {
			add(k, "%s", rule)
			continue
		}

		vs = append(vs, checkParam(sub, values[k], k)...)
	}

	req := make([]string, 0)

	for k, sub := range schema.properties {
		if _, ok := values[k]; !ok && !sub.optional && !sub.hasDefault {
			req = append(req, k)
		}
	}

	sort.Strings(req)

	for _, k := range req {
		add(k, "property is missing and it is not optional")
	}

	if len(vs) == 0 {
		return nil
	}

	return &Error{Kind: "request", Method: method, Endpoint: m.template, Violations: vs}
}

// checkParam checks one string parameter value.
func checkParam(p *prop, v, field string) []Violation {
	var vs []Violation

	add := func(f, format string, args ...any) {
		vs = append(vs, Violation{Field: f, Rule: fmt.Sprintf(format, args...)})
	}

	switch p.typ {
	case "integer":
		if !integerRE.MatchString(v) {
			add(field, "type check ('integer') failed - got '%s'", v)
			return vs
		}
	case "number":
		if !numberRE.MatchString(v) {
			add(field, "type check ('number') failed - got '%s'", v)
			return vs
		}
	case "boolean":
		if _, ok := parseBool(v); !ok {
			add(field, "type check ('boolean') failed - got '%s'", v)
			return vs
		}
	case "array", "object":
		// PVE gets these from the CLI or as JSON; over HTTP they are not checked here.
		return vs
	}

	return append(vs, checkScalar(p, v, field)...)
}

// checkScalar applies the checks after the type: format, pattern, lengths, range, enum (in
// PVE's order, stopping at the first failure as PVE does).
func checkScalar(p *prop, v, field string) []Violation {
	one := func(format string, args ...any) []Violation {
		return []Violation{{Field: field, Rule: fmt.Sprintf(format, args...)}}
	}

	if p.check != nil {
		if err := p.check(v); err != nil {
			return one("invalid format - %s", err)
		}
	} else if p.formatProps != nil {
		if vs := checkPropertyString(p.formatProps, v, field); len(vs) > 0 {
			return vs
		}
	} else if p.format != "" {
		if vs := checkNamedFormat(p, v, field); len(vs) > 0 {
			return vs
		}
	}

	if p.pattern != nil && !p.pattern.MatchString(v) {
		return one("value does not match the regex pattern")
	}

	if p.maxLength != nil && len([]rune(v)) > *p.maxLength {
		return one("value may only be %d characters long", *p.maxLength)
	}

	if p.minLength != nil && len([]rune(v)) < *p.minLength {
		return one("value must be at least %d characters long", *p.minLength)
	}

	if numberRE.MatchString(v) {
		f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if p.max != nil && f > *p.max {
			return one("value must have a maximum value of %s", fmtNum(*p.max))
		}

		if p.min != nil && f < *p.min {
			return one("value must have a minimum value of %s", fmtNum(*p.min))
		}
	}

	if len(p.enum) > 0 {
		for _, e := range p.enum {
			if e == v {
				return nil
			}
		}

		return one("value '%s' does not have a value in the enumeration '%s'", v, strings.Join(p.enum, ", "))
	}

	return nil
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

var (
	integerRE = regexp.MustCompile(`^\s*[-+]?\d+\s*$`)
	numberRE  = regexp.MustCompile(`^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$`)
	trueRE    = regexp.MustCompile(`^(?i:1|on|yes|true)$`)
	falseRE   = regexp.MustCompile(`^(?i:0|off|no|false)$`)
)

// parseBool is PVE::JSONSchema::parse_boolean.
func parseBool(v string) (bool, bool) {
	switch {
	case trueRE.MatchString(v):
		return true, true
	case falseRE.MatchString(v):
		return false, true
	}

	return false, false
}

// checkPropertyString is PVE::JSONSchema::parse_property_string followed by check_object with
// additionalProperties 0.
func checkPropertyString(format map[string]*prop, v, field string) []Violation {
	one := func(format string, args ...any) []Violation {
		return []Violation{{Field: field, Rule: "invalid format - " + fmt.Sprintf(format, args...)}}
	}

	res := map[string]string{}

	var defaultKey string

	for _, part := range strings.Split(v, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}

		k, val, hasEq := strings.Cut(part, "=")

		switch {
		case hasEq && k != "" && val != "":
			if _, dup := res[k]; dup {
				return one("duplicate key in comma-separated list property: %s", k)
			}

			sub := format[k]
			if sub != nil && sub.alias != "" {
				if sub.keyAlias != "" {
					if _, dup := res[sub.keyAlias]; dup {
						return one("key alias '%s' is already defined", sub.keyAlias)
					}

					res[sub.keyAlias] = k
				}

				k = sub.alias
				sub = format[k]
			}

			if sub == nil {
				return one("invalid key in comma-separated list property: %s", k)
			}

			res[k] = val
		case !hasEq:
			if defaultKey != "" {
				return one("duplicate key in comma-separated list property: %s", defaultKey)
			}

			for name, sub := range format {
				if sub.defaultKey {
					defaultKey = name
				}
			}

			if defaultKey == "" {
				return one("value without key, but schema does not define a default key")
			}

			if _, dup := res[defaultKey]; dup {
				return one("duplicate key in comma-separated list property: %s", defaultKey)
			}

			res[defaultKey] = part
		default:
			return one("missing key in comma-separated list property")
		}
	}

	var vs []Violation

	keys := make([]string, 0, len(format))
	for k := range format {
		keys = append(keys, k)
	}

	sort.Strings(keys)

	for _, k := range keys {
		sub := format[k]
		if sub.alias != "" {
			continue
		}

		val, ok := res[k]
		if !ok {
			if !sub.optional && !sub.hasDefault {
				vs = append(vs, Violation{Field: field + "." + k, Rule: "property is missing and it is not optional"})
			}

			continue
		}

		vs = append(vs, checkParam(sub, val, field+"."+k)...)
	}

	return vs
}

// CheckResponse checks the "data" member of a successful response (decoded from JSON) against
// the method's "returns" schema. Types are checked strictly where the schema gives them (a JSON
// string where PVE declares an integer is reported); returned properties the schema does not
// list are accepted unless it says additionalProperties 0; type "any" or a missing schema accepts
// anything.
func (s *Schema) CheckResponse(method, path string, data any) error {
	m, _, e := s.endpoint("response", method, path)
	if e != nil {
		return e
	}

	if m.returns == nil {
		return nil
	}

	vs := checkValue(m.returns, data, "data", false)
	if len(vs) == 0 {
		return nil
	}

	return &Error{Kind: "response", Method: method, Endpoint: m.template, Violations: vs}
}

// CheckResponseStrict is CheckResponse that also reports returned properties an object schema
// with properties does not list, as PVE's own check_object would (additionalProperties unset
// counts as 0 there). PVE's schemas under-document many answers, so expect reports on real PVE
// answers too; use it to find properties a fake invents.
func (s *Schema) CheckResponseStrict(method, path string, data any) error {
	m, _, e := s.endpoint("response", method, path)
	if e != nil {
		return e
	}

	if m.returns == nil {
		return nil
	}

	vs := checkValue(m.returns, data, "data", true)
	if len(vs) == 0 {
		return nil
	}

	return &Error{Kind: "response", Method: method, Endpoint: m.template, Violations: vs}
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, int, int64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}

	return fmt.Sprintf("%T", v)
}

func checkValue(p *prop, v any, field string, strict bool) []Violation {
	one := func(format string, args ...any) []Violation {
		return []Violation{{Field: field, Rule: fmt.Sprintf(format, args...)}}
	}

	if v == nil {
		if p.typ == "null" || p.optional || p.hasDefault {
			return nil
		}

		return one("property is missing and it is not optional (null)")
	}

	jt := jsonType(v)

	switch p.typ {
	case "", "any":
		return nil
	case "null":
		return one("type check ('null') failed - got JSON %s", jt)
	case "integer":
		f, ok := toFloat(v)
		if !ok {
			return one("type check ('integer') failed - got JSON %s %s", jt, short(v))
		}

		if f != math.Trunc(f) {
			return one("type check ('integer') failed - got %v", f)
		}

		return checkScalar(p, fmtNum(f), field)
	case "number":
		f, ok := toFloat(v)
		if !ok {
			return one("type check ('number') failed - got JSON %s %s", jt, short(v))
		}

		return checkScalar(p, fmtNum(f), field)
	case "boolean":
		switch t := v.(type) {
		case bool:
			return nil
		case float64:
			if t == 0 || t == 1 {
				return nil
			}
		}

		return one("type check ('boolean') failed - got JSON %s %s", jt, short(v))
	case "string":
		str, ok := v.(string)
		if !ok {
			return one("type check ('string') failed - got JSON %s %s", jt, short(v))
		}

		return checkScalar(p, str, field)
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return one("type check ('array') failed - got JSON %s", jt)
		}

		if p.items == nil {
			return nil
		}

		var vs []Violation
		for i, el := range arr {
			vs = append(vs, checkValue(p.items, el, fmt.Sprintf("%s[%d]", field, i), strict)...)
		}

		return vs
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return one("type check ('object') failed - got JSON %s", jt)
		}

		return checkObject(p, obj, field, strict)
	}

	return nil
}

func checkObject(p *prop, obj map[string]any, field string, strict bool) []Violation {
	var vs []Violation

	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}

	sort.Strings(keys)

	for _, k := range keys {
		sub, rule, ok := p.lookup(k)

		switch {
		case !ok && p.additionalSchema != nil:
			vs = append(vs, checkValue(p.additionalSchema, obj[k], field+"."+k, strict)...)
		case !ok:
			if p.noAdditional || (strict && !p.additional && len(p.properties)+len(p.indexed) > 0) {
				vs = append(vs, Violation{Field: field + "." + k,
					Rule: "property is not defined in schema and the schema does not allow additional properties"})
			}
		case rule != "":
			vs = append(vs, Violation{Field: field + "." + k, Rule: rule})
		default:
			vs = append(vs, checkValue(sub, obj[k], field+"."+k, strict)...)
		}
	}

	names := make([]string, 0, len(p.properties))
	for k := range p.properties {
		names = append(names, k)
	}

	sort.Strings(names)

	for _, k := range names {
		sub := p.properties[k]
		if _, ok := obj[k]; !ok && !sub.optional && !sub.hasDefault {
			vs = append(vs, Violation{Field: field + "." + k, Rule: "property is missing and it is not optional"})
		}
	}

	return vs
}

func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	}

	return 0, false
}

func short(v any) string {
	s := fmt.Sprintf("%q", fmt.Sprint(v))
	if len(s) > 40 {
		s = s[:37] + "..."
	}

	return s
}

func typeOf(p *prop) string {
	if p == nil {
		return "unknown"
	}

	return p.typ
}
