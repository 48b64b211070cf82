package proxmox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// RoleName is the role docs/install.md has users create for the component.
const RoleName = "TalosProxmox"

// permissionsTimeout bounds the privilege check (one request per path, in parallel).
const permissionsTimeout = 20 * time.Second

// PermissionReader answers the caller's effective privileges on a path, and the PVE version.
type PermissionReader interface {
	Version(ctx context.Context) (string, error)
	Permissions(ctx context.Context, path string) (map[string]bool, error)
}

// checkPrivileges asks Proxmox for the caller's privileges on every path the cluster needs
// (Required), one request per distinct path, in parallel, and returns one problem per path that
// lacks any, naming each missing privilege and what needs it. An error means the privileges
// could not be read (an old PVE, the network): the caller warns and goes on.
func checkPrivileges(ctx context.Context, api PermissionReader, creds pveclient.Credentials, c *spec.Cluster,
	vmIDs map[string]int,
) (problems []error, hidden func(problem error) bool, err error) {
	version, err := api.Version(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the Proxmox VE version: %w", err)
	}

	needs := Required(c, vmIDs, IsPVE9(version))

	paths := map[string]bool{}
	for _, n := range needs {
		paths[n.Path] = true
		if n.Alt != nil {
			paths[n.Alt.Path] = true
		}
	}

	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		have  = map[string]map[string]bool{}
		first error
	)

	for path := range paths {
		wg.Go(func() {
			privs, err := api.Permissions(ctx, path)

			mu.Lock()
			defer mu.Unlock()

			if err != nil && first == nil {
				first = err
			}

			have[path] = privs
		})
	}

	wg.Wait()

	if first != nil {
		return nil, nil, fmt.Errorf("reading the caller's privileges (GET /access/permissions): %w", first)
	}

	return MissingPrivileges(needs, have, creds), hiddenBy(have), nil
}

// hiddenBy tells the inventory problems that missing privileges explain: Proxmox lists only the
// datastores a caller may audit or allocate space on, and only the PCI mappings it may audit, use
// or modify, so to a caller without them they look missing; the privilege problem says what to do.
func hiddenBy(have map[string]map[string]bool) func(error) bool {
	var marks []string

	for path, privs := range have {
		switch {
		case strings.HasPrefix(path, "/storage/") && !privs["Datastore.Audit"] && !privs["Datastore.AllocateSpace"]:
			marks = append(marks, fmt.Sprintf("datastore %q does not exist", strings.TrimPrefix(path, "/storage/")))
		case strings.HasPrefix(path, "/mapping/pci/") && !privs["Mapping.Audit"] && !privs["Mapping.Use"] && !privs["Mapping.Modify"]:
			marks = append(marks, fmt.Sprintf("%q is not a PCI resource mapping", strings.TrimPrefix(path, "/mapping/pci/")))
		}
	}

	return func(problem error) bool {
		return slices.ContainsFunc(marks, func(m string) bool { return strings.Contains(problem.Error(), m) })
	}
}

// MissingPrivileges compares needs with the privileges the caller has per path and returns one
// error per path that lacks any.
func MissingPrivileges(needs []Need, have map[string]map[string]bool, creds pveclient.Credentials) []error {
	holds := func(path string, privs ...string) bool {
		return !slices.ContainsFunc(privs, func(p string) bool { return !have[path][p] })
	}

	var (
		order   []string
		missing = map[string][]Need{}
	)

	for _, n := range needs {
		if holds(n.Path, n.Priv) || slices.ContainsFunc(n.Any, func(p string) bool { return holds(n.Path, p) }) ||
			(n.Alt != nil && holds(n.Alt.Path, n.Alt.Privs...)) {
			continue
		}

		if missing[n.Path] == nil {
			order = append(order, n.Path)
		}

		missing[n.Path] = append(missing[n.Path], n)
	}

	key, who, kind := "proxmoxve:apiToken", "the token "+tokenID(creds.APIToken), "a token"
	if creds.APIToken == "" {
		key, who, kind = "proxmoxve:username", "the user "+creds.Username, "a user"
	}

	errs := make([]error, 0, len(order))

	for _, path := range order {
		var parts []string

		for _, n := range missing[path] {
			why := n.What
			if len(n.Any) > 0 {
				why += "; or " + strings.Join(n.Any, " or ")
			}

			if n.Alt != nil {
				why += fmt.Sprintf("; or %s on %s", strings.Join(n.Alt.Privs, " and "), n.Alt.Path)
			}

			parts = append(parts, fmt.Sprintf("%s (%s)", n.Priv, why))
		}

		list := strings.Join(parts, " and ")
		if len(parts) > 2 {
			list = strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
		}

		errs = append(errs, fmt.Errorf("%s: %s lacks %s on %s; grant them (docs/install.md) or use %s with the %s role",
			key, who, list, path, kind, RoleName))
	}

	return errs
}

// tokenID is the "user@realm!name" part of an API token "user@realm!name=secret".
func tokenID(token string) string {
	id, _, _ := strings.Cut(token, "=")
	return id
}
