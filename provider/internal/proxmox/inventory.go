// Package proxmox is what the component asks of Proxmox VE before it registers anything, and
// what it binds to the VMs it registers: the inventory (hosts, datastores, VM ids, PCI mappings)
// checked at preview, stable VM ids, the VM guard that clears what an interrupted create left,
// and the lookup of the proxmoxve provider (and its credentials) the cluster's children use. It
// reads and binds; it never registers a child resource (package wire does).
package proxmox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/cluster"
	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/hardware"
	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/storage"
	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// inventoryTimeout bounds the inventory check: a preview against an unreachable Proxmox API
// fails with an error naming it instead of hanging. With input problems already found, the check
// gets inventoryTimeoutWithProblems and its own failure is not reported: the input problems are
// what to fix first, and they need no Proxmox.
const (
	inventoryTimeout             = 60 * time.Second
	inventoryTimeoutWithProblems = 10 * time.Second
)

// Inventory is what the Proxmox cluster holds, as the proxmoxve provider's read-only functions
// report it: the same provider (and credentials) the cluster's VMs are created with.
type Inventory struct {
	Nodes       []string
	Datastores  map[string][]storage.GetDatastoresDatastore // by host
	VMs         []vm.GetVirtualMachinesVm                   // every VM: ids taken, nodes' own VMs
	PCIMappings []string                                    // only when a node uses a mapping
}

// checkInventory asks Proxmox about the hosts, datastores, VM ids and PCI mappings the cluster
// names and returns what does not exist or cannot serve, with property paths. An error means
// Proxmox could not be asked (unreachable, refused, too slow).
func checkInventory(ctx *pulumi.Context, c *spec.Cluster, invalid *spec.ValidationError, opts []pulumi.ResourceOption,
	timeout time.Duration,
) ([]error, *Inventory, error) {
	var invokeOpts []pulumi.InvokeOption
	if p := Provider(opts); p != nil {
		invokeOpts = []pulumi.InvokeOption{pulumi.Provider(p)}
	}

	type result struct {
		inv *Inventory
		err error
	}

	done := make(chan result, 1)
	go func() {
		inv, err := queryInventory(ctx, c, invokeOpts)
		done <- result{inv, err}
	}()

	select {
	case r := <-done:
		if r.err != nil {
			return nil, nil, fmt.Errorf("checking the Proxmox inventory (hosts, datastores, VM ids, PCI mappings) through "+
				"the proxmoxve provider failed: %w; check proxmoxve:endpoint, proxmoxve:apiToken and that the API is reachable", r.err)
		}

		return r.inv.problems(c, invalid), r.inv, nil
	case <-time.After(timeout):
		return nil, nil, fmt.Errorf("the Proxmox API did not answer the inventory check (hosts, datastores, VM ids, PCI "+
			"mappings) within %s; check proxmoxve:endpoint and that the API is reachable from here", timeout)
	}
}

func queryInventory(ctx *pulumi.Context, c *spec.Cluster, opts []pulumi.InvokeOption) (*Inventory, error) {
	nodes, err := retried(ctx.Context(), "proxmoxve:Cluster/getNodes", func() (*cluster.GetNodesResult, error) {
		return cluster.GetNodes(ctx, opts...)
	})
	if err != nil {
		return nil, err
	}

	inv := &Inventory{Nodes: nodes.Names, Datastores: map[string][]storage.GetDatastoresDatastore{}}

	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)

	// run asks in the background; keep stores the answer under the lock.
	run := func(ask func() (keep func(), err error)) {
		wg.Go(func() {
			keep, err := ask()

			mu.Lock()
			defer mu.Unlock()

			if err != nil {
				errs = append(errs, err)
				return
			}

			keep()
		})
	}

	for _, host := range usedHosts(c) {
		if slices.Contains(inv.Nodes, host) {
			run(func() (func(), error) {
				ds, err := retried(ctx.Context(), "proxmoxve:Storage/getDatastores on "+host, func() (*storage.GetDatastoresResult, error) {
					return storage.GetDatastores(ctx, &storage.GetDatastoresArgs{NodeName: host}, opts...)
				})

				return func() { inv.Datastores[host] = ds.Datastores }, err
			})
		}
	}

	run(func() (func(), error) {
		vms, err := retried(ctx.Context(), "proxmoxve:VM/getVirtualMachines", func() (*vm.GetVirtualMachinesResult, error) {
			return vm.GetVirtualMachines(ctx, &vm.GetVirtualMachinesArgs{}, opts...)
		})

		return func() { inv.VMs = vms.Vms }, err
	})

	if slices.ContainsFunc(c.Nodes, func(n spec.Node) bool {
		return slices.ContainsFunc(n.PCIDevices, func(d spec.PCIDevice) bool { return d.Mapping != "" })
	}) {
		run(func() (func(), error) {
			m, err := retried(ctx.Context(), "proxmoxve:Hardware/getMappings", func() (*hardware.GetMappingsResult, error) {
				return hardware.GetMappings(ctx, &hardware.GetMappingsArgs{Type: "pci"}, opts...)
			})

			return func() { inv.PCIMappings = m.Ids }, err
		})
	}

	wg.Wait()

	if len(errs) > 0 {
		return nil, errs[0]
	}

	return inv, nil
}

// retried runs the read-only inventory call what up to 4 times, 0.25 s, 0.5 s and 1 s apart: a
// Proxmox API under load answers 500 or 503 now and then (cfs-lock timeouts, pveproxy restarts),
// and the proxmoxve provider's functions do not retry. A Proxmox that keeps failing fails the
// check, with the error naming what was asked; so does a context that ends between tries.
func retried[T any](ctx context.Context, what string, call func() (*T, error)) (*T, error) {
	var r *T

	err := retry.Do(ctx, retry.After(250*time.Millisecond, 500*time.Millisecond, time.Second), func(context.Context) error {
		var err error
		r, err = call()

		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}

	return r, nil
}

func usedHosts(c *spec.Cluster) []string {
	var hosts []string
	for _, n := range c.Nodes {
		if !slices.Contains(hosts, n.HostNode) {
			hosts = append(hosts, n.HostNode)
		}
	}

	return hosts
}

// problems are the cluster's references that the inventory cannot serve. With no node reported
// (a provider that answers nothing, e.g. unknown configuration at preview), nothing is checked. A
// reference whose input was already refused (invalid, which may be nil) is not checked: its own
// error says what to fix, and a second one about the same value (`enable "raw" content` for an
// image.contentType Proxmox does not have) would point the wrong way.
func (inv *Inventory) problems(c *spec.Cluster, invalid *spec.ValidationError) []error {
	if len(inv.Nodes) == 0 {
		return nil
	}

	refused := func(paths ...string) bool {
		return invalid != nil && slices.ContainsFunc(paths, invalid.Has)
	}

	var errs []error

	add := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}

	imageChecked := map[string]bool{}
	imageProblems := map[string][]string{} // problem (with %s for the hosts) → hosts
	var imageOrder []string

	imageAdd := func(_, format string, args ...any) {
		// args[1] is the host: every image problem names it second.
		host := args[1].(string)
		args[1] = "%[1]s"
		key := fmt.Sprintf(format, args...)
		if _, seen := imageProblems[key]; !seen {
			imageOrder = append(imageOrder, key)
		}
		imageProblems[key] = append(imageProblems[key], host)
	}

	for _, n := range c.Nodes {
		at := "nodes." + n.Name
		if refused(at + ".hostNode") {
			continue
		}

		if !slices.Contains(inv.Nodes, n.HostNode) {
			add(at+".hostNode", "%q is not a node of this Proxmox cluster (nodes: %s); use one of them", n.HostNode, strings.Join(inv.Nodes, ", "))
			continue
		}

		if !imageChecked[n.HostNode] && !refused("image.datastoreId", "image.contentType") {
			imageChecked[n.HostNode] = true
			inv.checkDatastore(imageAdd, "image.datastoreId", n.HostNode, c.Image.DatastoreID, string(c.Image.ContentType))
		}

		if !refused(at + ".datastoreId") {
			inv.checkDatastore(add, at+".datastoreId", n.HostNode, n.DatastoreID, "images")
		}

		for i, d := range n.DataDisks {
			if d.DatastoreID != n.DatastoreID && !refused(fmt.Sprintf("%s.dataDisks[%d].datastoreId", at, i)) {
				inv.checkDatastore(add, fmt.Sprintf("%s.dataDisks[%d].datastoreId", at, i), n.HostNode, d.DatastoreID, "images")
			}
		}

		if n.VMID != 0 && !refused(at+".vmId") {
			if i := slices.IndexFunc(inv.VMs, func(v vm.GetVirtualMachinesVm) bool { return v.VmId == n.VMID }); i >= 0 {
				// With secrets.bundle a VM no other cluster of the component made is the running node
				// to adopt (Adoptees).
				if v := inv.VMs[i]; (c.Secrets == nil || othersVM(c.Name, v.Tags)) && (v.Name != n.Name || !slices.Contains(v.Tags, c.Name)) {
					add(at+".vmId", "%d is taken by VM %q on %s, which is not this cluster's %s; choose a free id, or remove vmId to let "+
						"Proxmox choose; or, if it is this node of a cluster that runs already, set secrets.bundle to adopt that cluster",
						n.VMID, v.Name, v.NodeName, n.Name)
				}
			}
		}

		for i, d := range n.PCIDevices {
			if d.Mapping != "" && !slices.Contains(inv.PCIMappings, d.Mapping) && !refused(fmt.Sprintf("%s.pciDevices[%d]", at, i)) {
				add(fmt.Sprintf("%s.pciDevices[%d].mapping", at, i), "%q is not a PCI resource mapping of this Proxmox cluster (mappings: %s); "+
					"create it under Datacenter → Resource Mappings, or pass the device by id", d.Mapping, listOrNone(inv.PCIMappings))
			}
		}
	}

	for _, key := range imageOrder {
		add("image.datastoreId", key, strings.Join(imageProblems[key], ", "))
	}

	// The CSI plugin makes a pod's volume on the host of the node the pod runs on.
	for _, t := range c.ProxmoxTokens {
		for i, ds := range t.Storages {
			for _, host := range usedHosts(c) {
				if slices.Contains(inv.Nodes, host) && !refused(t.StorageInputs[i]) {
					inv.checkDatastore(add, t.StorageInputs[i], host, ds, "images")
				}
			}
		}
	}

	return errs
}

// checkDatastore reports a datastore that host does not have, that is disabled or inactive, or
// that cannot hold content.
func (inv *Inventory) checkDatastore(add func(string, string, ...any), path, host, id, content string) {
	stores := inv.Datastores[host]

	i := slices.IndexFunc(stores, func(d storage.GetDatastoresDatastore) bool { return d.Id == id })
	if i < 0 {
		var ids []string
		for _, d := range stores {
			ids = append(ids, d.Id)
		}

		add(path, "datastore %q does not exist on %s (datastores: %s)", id, host, listOrNone(ids))

		return
	}

	d := stores[i]

	switch {
	case d.Enabled != nil && !*d.Enabled, d.Active != nil && !*d.Active:
		add(path, "datastore %q is disabled or inactive on %s; enable it or choose another", id, host)
	case !slices.Contains(d.ContentTypes, content):
		add(path, "datastore %q on %s cannot hold %s content (it holds %s); enable %q on it under Datacenter → Storage, or choose another",
			id, host, content, listOrNone(d.ContentTypes), content)
	}
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}

	return strings.Join(items, ", ")
}

// Check runs the inventory check unless the inputs failed in a way that leaves no
// cluster to check. A failure to ask Proxmox is a problem when the inputs are valid; with input
// problems it is left out (see inventoryTimeoutWithProblems). The inventory is returned when
// Proxmox answered.
func Check(ctx *pulumi.Context, c *spec.Cluster, specErr error, opts []pulumi.ResourceOption) ([]error, *Inventory) {
	var invalid *spec.ValidationError
	if c == nil || (specErr != nil && !errors.As(specErr, &invalid)) {
		return nil, nil
	}

	if specErr != nil {
		problems, inv, _ := checkInventory(ctx, c, invalid, opts, inventoryTimeoutWithProblems)
		return problems, inv
	}

	problems, inv, err := checkInventory(ctx, c, nil, opts, inventoryTimeout)
	if err != nil {
		return []error{err}, nil
	}

	privs, hidden := privilegeProblems(ctx, c, inv, opts)
	problems = append(problems, clusterNICProblems(ctx, c, inv, opts)...)

	return withoutHidden(problems, privs, hidden), inv
}

// privilegeProblems checks the caller's privileges (checkPrivileges) with the credentials of the
// children's proxmoxve provider. Privileges that cannot be read are a warning, not a problem: the
// calls themselves will say what Proxmox refuses. hidden tells the inventory problems the missing
// privileges explain.
func privilegeProblems(ctx *pulumi.Context, c *spec.Cluster, inv *Inventory, opts []pulumi.ResourceOption) (problems []error, hidden func(error) bool) {
	none := func(error) bool { return false }

	if inv == nil || len(inv.Nodes) == 0 {
		return nil, none
	}

	creds := proxmoxCredentials(ctx, opts)
	if !creds.Usable() {
		_ = ctx.Log.Debug("no Proxmox credentials the component can use itself: the privilege check is skipped", nil)
		return nil, none
	}

	api, err := pveclient.New(creds)
	if err != nil {
		_ = ctx.Log.Warn(fmt.Sprintf("the component's privileges on Proxmox were not checked: %v", err), nil)
		return nil, none
	}

	vmIDs, _, _ := AssignVMIDs(c, inv)

	wait, cancel := context.WithTimeout(ctx.Context(), permissionsTimeout)
	defer cancel()

	problems, hidden, err = checkPrivileges(wait, api, creds, c, vmIDs)
	if err != nil {
		_ = ctx.Log.Warn(fmt.Sprintf("the component's privileges on Proxmox were not checked (%v); a privilege it lacks will "+
			"fail the call that needs it (the privileges it needs: docs/install.md)", err), nil)

		return nil, none
	}

	return problems, hidden
}

// withoutHidden is problems without those hidden explains, then privs.
func withoutHidden(problems []error, privs []error, hidden func(error) bool) []error {
	out := slices.DeleteFunc(slices.Clone(problems), hidden)
	return append(out, privs...)
}

// IsNew reports whether Proxmox holds no VM of the cluster (by its tags), so its secrets are
// created in this update with the contract asked for. Unknown (inv nil: Proxmox not asked, or a
// provider that answers nothing, e.g. with unknown configuration at preview) is not new.
//
// Proxmox, not the state, decides: secrets left by a first `up` that failed before any VM keep
// the contract they were created with, and if talosVersion or configContract changed since, a
// patch the placeholder check accepts may still be refused at the apply, after the VMs exist.
func (inv *Inventory) IsNew(cluster string) bool {
	if inv == nil || len(inv.Nodes) == 0 {
		return false
	}

	return !slices.ContainsFunc(inv.VMs, func(v vm.GetVirtualMachinesVm) bool { return isOwnVM(cluster, v.Tags) })
}

// HasVM reports whether Proxmox holds a VM of the cluster's node (false when inv is nil).
func (inv *Inventory) HasVM(cluster, node string) bool {
	return inv != nil && len(ownVMs(cluster, node, inv.VMs)) > 0
}
