package pveclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
)

// Guest is a VM as the cluster's resource list shows it.
type Guest struct {
	VMID     int    `json:"vmid"`
	Node     string `json:"node"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	RawTags  string `json:"tags"`
	Template int    `json:"template"`
}

// Tags are the guest's tags (Proxmox stores them ';'-separated).
func (g *Guest) Tags() []string {
	return strings.FieldsFunc(g.RawTags, func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
}

// Guest returns the VM with id vmid anywhere in the Proxmox cluster, or nil when there is none.
func (c *Client) Guest(ctx context.Context, vmid int) (*Guest, error) {
	var all []Guest
	if err := c.get(ctx, "/cluster/resources", url.Values{"type": {"vm"}}, &all); err != nil {
		return nil, err
	}

	for i := range all {
		if all[i].VMID == vmid {
			return &all[i], nil
		}
	}

	return nil, nil
}

// taskEntry is one line of a node's task list.
type taskEntry struct {
	UPID      string `json:"upid"`
	Type      string `json:"type"`
	ID        string `json:"id"`
	StartTime int64  `json:"starttime"`
	Status    string `json:"status"`
}

// StartedSinceCreated tells whether the VM vmid on node has been started since it was created,
// by its task history: a "qmstart" task not older than its newest "qmcreate". An id reused after
// a destroy keeps the old VM's tasks, hence the comparison. A VM whose create task is no longer
// in the history (Proxmox keeps a bounded number) counts as started: nothing proves otherwise.
func (c *Client) StartedSinceCreated(ctx context.Context, node string, vmid int) (bool, error) {
	var tasks []taskEntry

	q := url.Values{"vmid": {strconv.Itoa(vmid)}, "source": {"all"}, "limit": {"1000"}}
	if err := c.get(ctx, "/nodes/"+url.PathEscape(node)+"/tasks", q, &tasks); err != nil {
		return false, err
	}

	var created, started int64 = -1, -1

	for _, t := range tasks {
		if t.ID != strconv.Itoa(vmid) {
			continue
		}

		switch t.Type {
		case "qmcreate":
			created = max(created, t.StartTime)
		case "qmstart":
			started = max(started, t.StartTime)
		}
	}

	return created < 0 || started >= created, nil
}

// Destroy destroys the VM vmid on node with its disks (purge, unreferenced disks too) and waits
// for the task. A destroy whose answer was lost is not sent twice blindly: the VM's absence
// counts as done.
func (c *Client) Destroy(ctx context.Context, node string, vmid int) error {
	path := fmt.Sprintf("/nodes/%s/qemu/%d", url.PathEscape(node), vmid)
	q := url.Values{"purge": {"1"}, "destroy-unreferenced-disks": {"1"}}

	var (
		upid string
		gone bool
	)

	err := c.retried(ctx, func(ctx context.Context) error {
		err := c.do(ctx, http.MethodDelete, path, q, &upid)
		if err != nil {
			g, gerr := c.Guest(ctx, vmid)
			gone = gerr == nil && g == nil
		}

		if gone {
			return nil
		}

		return err
	})

	switch {
	case err != nil:
		return fmt.Errorf("destroying VM %d on %s: %w", vmid, node, err)
	case gone:
		return nil
	}

	return c.WaitTask(ctx, node, upid)
}

// WaitTask polls a task's status every half second until it stops and returns its error exit
// status, if any. Failed status reads are repeated (Retry) before giving up.
func (c *Client) WaitTask(ctx context.Context, node, upid string) error {
	path := "/nodes/" + url.PathEscape(node) + "/tasks/" + url.PathEscape(upid) + "/status"

	err := retry.Until(ctx, retry.Every(500*time.Millisecond), func(ctx context.Context) (bool, error) {
		var st struct {
			Status     string `json:"status"`
			ExitStatus string `json:"exitstatus"`
		}
		if err := c.get(ctx, path, nil, &st); err != nil {
			return false, fmt.Errorf("waiting for task %s: %w", upid, err)
		}

		switch {
		case st.Status == "running":
			return false, nil
		case st.ExitStatus != "OK" && !strings.HasPrefix(st.ExitStatus, "WARNINGS"):
			return false, fmt.Errorf("task %s failed: %s", upid, st.ExitStatus)
		}

		return true, nil
	})
	if err != nil && err == ctx.Err() { // Until returns ctx.Err() itself when the wait ends with ctx
		return fmt.Errorf("waiting for task %s: %w", upid, err)
	}

	return err
}

// Version is the Proxmox VE release the API runs (GET /version), e.g. "9.1.3".
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"version"`
	}
	if err := c.get(ctx, "/version", nil, &v); err != nil {
		return "", err
	}

	return v.Version, nil
}

// Permissions are the caller's effective privileges on path (GET /access/permissions?path=…):
// for an API token its own, privilege separation included; for root@pam every privilege.
func (c *Client) Permissions(ctx context.Context, path string) (map[string]bool, error) {
	var all map[string]map[string]any
	if err := c.get(ctx, "/access/permissions", url.Values{"path": {path}}, &all); err != nil {
		return nil, err
	}

	out := map[string]bool{}
	for priv := range all[path] {
		out[priv] = true
	}

	return out, nil
}

// VMConfig returns VM vmid's configuration on node (GET /nodes/{node}/qemu/{vmid}/config), each
// value as Proxmox writes it in the VM's configuration file ("virtio=BC:24:11:…,bridge=vmbr0").
func (c *Client) VMConfig(ctx context.Context, node string, vmid int) (map[string]string, error) {
	var raw map[string]any
	if err := c.get(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/config", url.PathEscape(node), vmid), nil, &raw); err != nil {
		return nil, err
	}

	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			out[k] = v
		case float64:
			out[k] = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			out[k] = fmt.Sprint(v)
		}
	}

	return out, nil
}

// Volume is one file of a datastore, as its content list shows it.
type Volume struct {
	// VolID is "<storage>:<content>/<file>" for files ("local:import/talos.qcow2").
	VolID   string `json:"volid"`
	Content string `json:"content"`
	Format  string `json:"format"`
	Size    int64  `json:"size"`
}

// Content lists the volumes of datastore storage on node (GET /nodes/{node}/storage/{storage}/content),
// every content type the datastore holds.
func (c *Client) Content(ctx context.Context, node, storage string) ([]Volume, error) {
	var out []Volume
	if err := c.get(ctx, fmt.Sprintf("/nodes/%s/storage/%s/content", url.PathEscape(node), url.PathEscape(storage)), nil, &out); err != nil {
		return nil, err
	}

	return out, nil
}
