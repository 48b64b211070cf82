package pvefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pveschema"
)

// schemaChecker runs Options.Schema on every request and answer. Violations are collected,
// never answered: the fake serves as it would without it.
type schemaChecker struct {
	schema *pveschema.Schema
	report string // file the violations are appended to (PVEFAKE_SCHEMA_REPORT)
	strict bool   // also report undeclared returned properties (PVEFAKE_SCHEMA_STRICT=1)

	mu         sync.Mutex
	requests   int
	responses  int
	violations []string
}

// SchemaEnv names the environment variable that turns the schema check on for fakes started
// without Options.Schema: a version pveschema.Load accepts ("8.4", "9"). SchemaReportEnv names a
// file each violation is appended to, one per line. Both are for running existing test suites
// under the check (see Options.Schema).
const (
	SchemaEnv       = "PVEFAKE_SCHEMA"
	SchemaReportEnv = "PVEFAKE_SCHEMA_REPORT"
	// SchemaStrictEnv=1 also reports returned properties the schema does not list
	// (pveschema.Schema.CheckResponseStrict).
	SchemaStrictEnv = "PVEFAKE_SCHEMA_STRICT"
)

func newSchemaChecker(opts Options) (*schemaChecker, error) {
	s := opts.Schema

	if s == nil {
		v := os.Getenv(SchemaEnv)
		if v == "" {
			return nil, nil
		}

		var err error
		if s, err = pveschema.Load(v); err != nil {
			return nil, fmt.Errorf("%s: %w", SchemaEnv, err)
		}
	}

	return &schemaChecker{schema: s, report: os.Getenv(SchemaReportEnv), strict: os.Getenv(SchemaStrictEnv) == "1"}, nil
}

func (c *schemaChecker) add(msg string) {
	c.mu.Lock()
	c.violations = append(c.violations, msg)
	c.mu.Unlock()

	if c.report == "" {
		return
	}

	f, err := os.OpenFile(c.report, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}

	_, _ = fmt.Fprintln(f, msg)
	_ = f.Close()
}

// checkRequest checks a request the fake routed; code is the fake's answer.
func (c *schemaChecker) checkRequest(r *http.Request, path string, code int) {
	c.mu.Lock()
	c.requests++
	c.mu.Unlock()

	if err := c.schema.CheckRequest(r.Method, path, r.Form); err != nil {
		c.add(fmt.Sprintf("%v (fake answered %d)", err, code))
	}
}

// checkResponse checks the data of a 200 answer as the client decodes it.
func (c *schemaChecker) checkResponse(method, path string, data any) {
	c.mu.Lock()
	c.responses++
	c.mu.Unlock()

	body, err := json.Marshal(data)
	if err != nil {
		return
	}

	var decoded any
	if err := json.Unmarshal(body, &decoded); err != nil {
		return
	}

	check := c.schema.CheckResponse
	if c.strict {
		check = c.schema.CheckResponseStrict
	}

	if err := check(method, path, decoded); err != nil {
		c.add(err.Error())
	}
}

// SchemaViolations lists what the schema check (Options.Schema or PVEFAKE_SCHEMA) found so far:
// requests PVE's schema rejects (with the fake's own answer code) and answers that break the
// method's "returns" schema. Nil when the check is off.
func (s *Server) SchemaViolations() []string {
	if s.schema == nil {
		return nil
	}

	s.schema.mu.Lock()
	defer s.schema.mu.Unlock()

	return append([]string(nil), s.schema.violations...)
}

// SchemaChecks counts the requests and responses the schema check has checked.
func (s *Server) SchemaChecks() (requests, responses int) {
	if s.schema == nil {
		return 0, 0
	}

	s.schema.mu.Lock()
	defer s.schema.mu.Unlock()

	return s.schema.requests, s.schema.responses
}

// summary appends the counts to the report file, as a "#" line.
func (c *schemaChecker) summary() {
	if c.report == "" {
		return
	}

	c.mu.Lock()
	line := fmt.Sprintf("# %s: checked %d requests, %d responses, %d violations",
		c.schema.Source.Version, c.requests, c.responses, len(c.violations))
	c.mu.Unlock()

	f, err := os.OpenFile(c.report, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}

	_, _ = fmt.Fprintln(f, line)
	_ = f.Close()
}
