// Package pveclient is the little of the Proxmox VE API the component calls itself, outside
// the proxmoxve provider: finding a guest by VM id, reading a VM's task history and destroying a
// VM that an interrupted create left behind. Reads are retried on the transient failures a busy
// Proxmox answers (5xx, a dropped connection); a write is sent again only when Proxmox shows it
// had no effect.
package pveclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Credentials reach one Proxmox API, as the proxmoxve provider is configured: an API token
// ("user@realm!id=secret"), or a user name and password.
type Credentials struct {
	Endpoint string
	APIToken string
	Username string
	Password string
	Insecure bool
}

// Usable tells whether the credentials can reach an API.
func (c Credentials) Usable() bool {
	return c.Endpoint != "" && (c.APIToken != "" || (c.Username != "" && c.Password != ""))
}

// Client calls one Proxmox API.
type Client struct {
	base  string
	creds Credentials
	http  *http.Client

	// Retry is the backoff before each repeat of a failed read; its length bounds the repeats.
	Retry []time.Duration

	mu     sync.Mutex
	ticket string
	csrf   string
}

// New returns a client for the API at creds.Endpoint (e.g. "https://pve1:8006/").
func New(creds Credentials) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(creds.Endpoint))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("the Proxmox endpoint %q is not an http(s) URL", creds.Endpoint)
	}

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: creds.Insecure} //nolint:gosec // the user's proxmoxve:insecure

	return &Client{
		base:  strings.TrimRight(u.String(), "/") + "/api2/json",
		creds: creds,
		http:  &http.Client{Transport: transport, Timeout: 30 * time.Second},
		Retry: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second},
	}, nil
}

// APIError is an answer other than 2xx.
type APIError struct {
	Method, Path string
	Code         int
	Message      string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Code, e.Message)
}

// get reads path into out, repeating transient failures.
func (c *Client) get(ctx context.Context, path string, query url.Values, out any) error {
	return c.retried(ctx, func(ctx context.Context) error { return c.do(ctx, http.MethodGet, path, query, out) })
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, out any) error {
	if err := c.login(ctx); err != nil {
		return err
	}

	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}

	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}

	c.authorize(req)

	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close() //nolint:errcheck // a read body

	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}

	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(resp.Status)
		var e struct {
			Errors  map[string]string `json:"errors"`
			Message string            `json:"message"`
		}
		if json.Unmarshal(body, &e) == nil && (e.Message != "" || len(e.Errors) > 0) {
			msg = strings.TrimSpace(e.Message + " " + fmt.Sprint(e.Errors))
		}

		return &APIError{Method: method, Path: path, Code: resp.StatusCode, Message: msg}
	}

	if out == nil {
		return nil
	}

	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}

	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}

	return nil
}

func (c *Client) authorize(req *http.Request) {
	if c.creds.APIToken != "" {
		req.Header.Set("Authorization", "PVEAPIToken="+c.creds.APIToken)
		return
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	req.AddCookie(&http.Cookie{Name: "PVEAuthCookie", Value: c.ticket})
	if req.Method != http.MethodGet {
		req.Header.Set("CSRFPreventionToken", c.csrf)
	}
}

// login gets a ticket for user and password once.
func (c *Client) login(ctx context.Context) error {
	if c.creds.APIToken != "" {
		return nil
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.ticket != "" {
		return nil
	}

	form := url.Values{"username": {c.creds.Username}, "password": {c.creds.Password}}

	return c.retried(ctx, func(ctx context.Context) error { return c.requestTicket(ctx, form) })
}

func (c *Client) requestTicket(ctx context.Context, form url.Values) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/access/ticket", bytes.NewBufferString(form.Encode()))
	if err != nil {
		return err
	}

	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")

	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("logging in to Proxmox: %w", err)
	}
	defer resp.Body.Close() //nolint:errcheck // a read body

	if resp.StatusCode/100 != 2 {
		return &APIError{Method: http.MethodPost, Path: "/access/ticket", Code: resp.StatusCode, Message: resp.Status}
	}

	var env struct {
		Data struct {
			Ticket string `json:"ticket"`
			CSRF   string `json:"CSRFPreventionToken"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Data.Ticket == "" {
		return fmt.Errorf("logging in to Proxmox: no ticket in the answer (%v)", err)
	}

	c.ticket, c.csrf = env.Data.Ticket, env.Data.CSRF

	return nil
}
