package ccmemu

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Errors of go-proxmox (luthermonson's and sergelogvinov's) and of the CCM's pool, with their
// messages: the CCM tells "not found" from other failures by the message.
var (
	errNotAuthorized  = errors.New("not authorized to access endpoint")
	errVMNotFound     = errors.New("VM machine not found")
	errVMUnreachable  = errors.New("VM machine unreachable")
	errRegionNotFound = errors.New("region not found")
	errInstanceNF     = errors.New("instance not found")
	errNodeInaccess   = errors.New("node is inaccessible")
)

// pve is one region's Proxmox API client, as the CCM's pool makes it with go-proxmox.
type pve struct {
	region string
	base   string
	token  string // <token_id>=<token_secret>
	http   *http.Client

	mu    sync.Mutex
	vms   []resource
	vmsAt time.Time
}

// resource is an entry of GET /cluster/resources (go-proxmox's ClusterResource).
type resource struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Node     string `json:"node"`
	Status   string `json:"status"`
	Template uint64 `json:"template"`
	VMID     uint64 `json:"vmid"`
}

// vm is what GetVMConfig gathers: the resource's node, status/current and the configuration.
type vm struct {
	ID      int
	Node    string
	Name    string
	Status  string
	CPUs    int
	MaxMem  uint64
	SMBios1 string
}

func newPVE(c *cluster) *pve {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.Insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // the config's insecure: true
	}

	return &pve{
		region: c.Region, base: strings.TrimSuffix(c.URL, "/"), token: c.TokenID + "=" + c.TokenSecret,
		http: &http.Client{Transport: tr, Timeout: 30 * time.Second},
	}
}

// get is luthermonson/go-proxmox's Client.Req for a GET with an API token.
func (p *pve) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return err
	}

	req.Header.Add("User-Agent", "ProxmoxCCM/1.0")
	req.Header.Add("Accept", "application/json")
	req.Header.Add("Authorization", "PVEAPIToken="+p.token)

	res, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()

	switch res.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return errNotAuthorized
	case http.StatusInternalServerError, http.StatusNotImplemented:
		return errors.New(res.Status)
	}

	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}

	if res.StatusCode == http.StatusBadRequest {
		return fmt.Errorf("bad request: %s - %s", res.Status, body)
	}

	var data map[string]json.RawMessage
	if err := json.Unmarshal(body, &data); err != nil {
		return err
	}

	if raw, ok := data["data"]; ok {
		return json.Unmarshal(raw, v)
	}

	return json.Unmarshal(body, v)
}

// version is GET /version.
func (p *pve) version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"version"`
	}

	err := p.get(ctx, "/version", &v)

	return v.Version, err
}

// resources is GET /cluster/resources?type=vm, uncached (Initialize's check).
func (p *pve) resources(ctx context.Context) ([]resource, error) {
	var rs []resource

	return rs, p.get(ctx, "/cluster/resources?type=vm", &rs)
}

// cachedVMs is go-proxmox's getResources("vm"): kept 5 s, fetched again while empty.
func (p *pve) cachedVMs(ctx context.Context) ([]resource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	if len(p.vms) > 0 && time.Since(p.vmsAt) < 5*time.Second {
		return p.vms, nil
	}

	rs, err := p.resources(ctx)
	if err != nil {
		return nil, fmt.Errorf("could not list cluster resources: %w", err)
	}

	p.vms, p.vmsAt = rs, time.Now()

	return rs, nil
}

// vmByFilter is GetVMByFilter: the first VM (not a template) the filter takes.
func (p *pve) vmByFilter(ctx context.Context, filter func(resource) (bool, error)) (resource, error) {
	rs, err := p.cachedVMs(ctx)
	if err != nil {
		return resource{}, err
	}

	for _, r := range rs {
		if r.Template == 1 {
			continue
		}

		ok, err := filter(r)
		if err != nil {
			return resource{}, err
		}

		if ok {
			return r, nil
		}
	}

	return resource{}, errVMNotFound
}

// vmByID is GetVMByID.
func (p *pve) vmByID(ctx context.Context, id int) (resource, error) {
	return p.vmByFilter(ctx, func(r resource) (bool, error) { return r.VMID == uint64(id), nil }) //nolint:gosec // VM ids are small
}

// vmConfig is GetVMConfig: the VM among the resources, then status/current (Ping) and config.
func (p *pve) vmConfig(ctx context.Context, id int) (*vm, error) {
	r, err := p.vmByID(ctx, id)
	if err != nil {
		return nil, err
	}

	if r.Status == "unknown" {
		return nil, errVMUnreachable
	}

	var status struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		CPUs   int    `json:"cpus"`
		MaxMem uint64 `json:"maxmem"`
	}

	if err := p.get(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/status/current", r.Node, id), &status); err != nil {
		return nil, err
	}

	var conf struct {
		SMBios1 string `json:"smbios1"`
	}

	if err := p.get(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/config", r.Node, id), &conf); err != nil {
		return nil, err
	}

	return &vm{ID: id, Node: r.Node, Name: status.Name, Status: status.Status, CPUs: status.CPUs, MaxMem: status.MaxMem,
		SMBios1: conf.SMBios1}, nil
}

// smbios is go-proxmox's VMSMBIOS unmarshal of smbios1: comma-separated key=value pairs; a pair
// with another '=' in it (base64 padding) is skipped, as there.
func smbios(s string) map[string]string {
	out := map[string]string{}

	for p := range strings.SplitSeq(s, ",") {
		kv := strings.Split(strings.TrimSpace(p), "=")
		if len(kv) == 2 {
			out[kv[0]] = kv[1]
		}
	}

	return out
}

// uuid is GetVMUUID.
func (v *vm) uuid() string { return smbios(v.SMBios1)["uuid"] }

// sku is GetVMSKU: the smbios1 sku, base64-decoded.
func (v *vm) sku() string {
	b, _ := base64.StdEncoding.DecodeString(smbios(v.SMBios1)["sku"])

	return string(b)
}
