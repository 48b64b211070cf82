package pveclient

import (
	"context"
	"errors"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
)

// transient tells whether a failed Proxmox API call may succeed when repeated: a 5xx (a busy
// pveproxy, a cfs-lock timeout) or a connection that failed, but not the caller's context ending.
func transient(err error) bool {
	var api *APIError
	if errors.As(err, &api) {
		return api.Code >= 500
	}

	return err != nil && !retry.ContextEnded(err)
}

// retried calls try, repeating its transient failures after each of c.Retry's pauses.
func (c *Client) retried(ctx context.Context, try func(context.Context) error) error {
	return retry.Do(ctx, retry.After(c.Retry...), func(ctx context.Context) error {
		err := try(ctx)
		if err != nil && !transient(err) {
			return retry.Permanent(err)
		}

		return err
	})
}
