package pvefake

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// start runs a fake for one test.
func start(t *testing.T, opts Options) *Server {
	t.Helper()

	if opts.Logf == nil {
		opts.Logf = t.Logf
	}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = s.Close() })

	return s
}

// response is a decoded API answer.
type response struct {
	Code   int
	Reason string // the HTTP reason phrase, which PVE uses for the error message
	Body   map[string]any
}

func (r response) data() any { return r.Body["data"] }

func (r response) dataMap(t *testing.T) map[string]any {
	t.Helper()

	m, ok := r.Body["data"].(map[string]any)
	if !ok {
		t.Fatalf("data is %T (%v), want an object", r.Body["data"], r.Body)
	}

	return m
}

func (r response) dataList(t *testing.T) []any {
	t.Helper()

	l, ok := r.Body["data"].([]any)
	if !ok {
		t.Fatalf("data is %T (%v), want a list", r.Body["data"], r.Body)
	}

	return l
}

// apiClient speaks to the fake like bpg does: TLS 1.3, token header, form bodies.
type apiClient struct {
	t     *testing.T
	base  string
	auth  string
	http  *http.Client
	extra http.Header
}

func newClient(t *testing.T, s *Server) *apiClient {
	return &apiClient{
		t:    t,
		base: s.URL() + "/api2/json/",
		auth: "PVEAPIToken=" + s.APIToken(),
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}, //nolint:gosec // self-signed
		}},
	}
}

func (c *apiClient) do(method, path string, params url.Values) response {
	c.t.Helper()

	var body io.Reader

	target := c.base + path
	if len(params) > 0 {
		if method == http.MethodGet || method == http.MethodDelete {
			target += "?" + params.Encode()
		} else {
			body = strings.NewReader(params.Encode())
		}
	}

	req, err := http.NewRequest(method, target, body)
	if err != nil {
		c.t.Fatal(err)
	}

	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}

	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}

	for k, v := range c.extra {
		req.Header[k] = v
	}

	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = res.Body.Close() }()

	out := response{Code: res.StatusCode, Reason: strings.TrimPrefix(res.Status, res.Status[:4])}

	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &out.Body); err != nil {
		c.t.Fatalf("%s %s: body %q is not JSON: %v", method, path, raw, err)
	}

	return out
}

// ok calls and requires a 200.
func (c *apiClient) ok(method, path string, params url.Values) response {
	c.t.Helper()

	r := c.do(method, path, params)
	if r.Code != http.StatusOK {
		c.t.Fatalf("%s %s: %d %s %v", method, path, r.Code, r.Reason, r.Body)
	}

	return r
}

// waitTask polls a task until it stops and returns its exit status.
func (c *apiClient) waitTask(node, upid string) string {
	c.t.Helper()

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st := c.ok("GET", "nodes/"+node+"/tasks/"+url.PathEscape(upid)+"/status", nil).dataMap(c.t)
		if st["status"] == "stopped" {
			return st["exitstatus"].(string)
		}

		time.Sleep(20 * time.Millisecond)
	}

	c.t.Fatalf("task %s still running", upid)

	return ""
}

func form(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}

	return v
}
