package proxmox

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/await"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// VMGuard clears what an interrupted VM create left in Proxmox. bpg creates a VM with one POST
// and records its id only once it has read the create task's status; one failed status read (a
// busy Proxmox answers 500 now and then) fails the create after Proxmox made the VM. That VM is
// in Proxmox but not in the state: an orphan. With stable VM ids (AssignVMIDs) a retried create
// asks for the orphan's id and Proxmox refuses it, so the guard clears the orphan first, through
// Pulumi resource hooks on each node's VM:
//
//   - on error (the engine calls it when the create failed): when the failure names the VM's
//     create task and Proxmox shows the VM — this cluster's node, stopped, never started since it
//     was created — the guard destroys it and asks the engine to retry the create, in the same up;
//   - before create (the engine calls it only for a VM that is not in the state, or for the new
//     VM of a replacement, after the old one was deleted; at preview too): the same check clears
//     an orphan an earlier up left (its error hook could not); a preview only says that the up
//     will. A VM of this node that has run stops the create with an error saying what to do (a
//     preview only warns: it cannot tell it from the VM a replacement deletes first); someone
//     else's VM at the id stops the preview too.
//
// Adopting the orphan instead (the `import` option) is not possible safely: the component does
// not see the state, and import on a VM that is in it replaces, so deletes, that VM. The orphan
// of a failed create holds nothing: it never started, and bpg had not yet resized its disks.
//
// The guard talks to Proxmox itself (pveclient) with the credentials the children's proxmoxve
// provider has (proxmoxCredentials). Without usable ones it does nothing and Proxmox's refusal
// ("VM … already exists") stands, which docs/recovery.md explains.
type VMGuard struct {
	ctx     *pulumi.Context
	comp    pulumi.Resource
	cluster string
	creds   pveclient.Credentials

	once   sync.Once
	client *pveclient.Client
}

// maxOrphanRetries bounds the creates the error hook retries for one VM in one step.
const maxOrphanRetries = 5

// NewVMGuard is the guard of cluster's VMs, registered as children of comp, with the credentials
// of the proxmoxve provider in opts (or the default provider's).
func NewVMGuard(ctx *pulumi.Context, comp pulumi.Resource, cluster string, opts []pulumi.ResourceOption) *VMGuard {
	return &VMGuard{ctx: ctx, comp: comp, cluster: cluster, creds: proxmoxCredentials(ctx, opts)}
}

func (g *VMGuard) api() *pveclient.Client {
	g.once.Do(func() {
		if !g.creds.Usable() {
			return
		}

		c, err := pveclient.New(g.creds)
		if err != nil {
			g.warn("the VM guard cannot reach Proxmox (%v); a VM left by an interrupted create must be deleted by hand", err)
			return
		}

		g.client = c
	})

	return g.client
}

func (g *VMGuard) warn(format string, args ...any) {
	_ = g.ctx.Log.Warn(fmt.Sprintf(format, args...), &pulumi.LogArgs{Resource: g.comp})
}

// Hooks are the resource option binding the guard to the VM of node n with id vmid (0: Proxmox
// chooses, nothing to guard). resName is the VM's resource name, unique in the stack. replaced says
// this `up` replaces the node's VM (Inventory.Replacement): the VM a preview finds at the id is
// then the one the replacement deletes first, and the preview says nothing of it.
func (g *VMGuard) Hooks(n spec.Node, vmid int, resName string, replaced bool) ([]pulumi.ResourceOption, error) {
	if vmid == 0 || g.api() == nil {
		return nil, nil
	}

	before, err := g.ctx.RegisterResourceHook("talos-proxmox-vm-guard-before-"+resName, func(*pulumi.ResourceHookArgs) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()

		if replaced && g.ctx.DryRun() {
			return nil
		}

		_, err := g.clear(ctx, n, vmid, resName, false)

		return err
	}, &pulumi.ResourceHookOptions{OnDryRun: true})
	if err != nil {
		return nil, err
	}

	onError, err := g.ctx.RegisterErrorHook("talos-proxmox-vm-guard-error-"+resName, func(args *pulumi.ErrorHookArgs) (bool, error) {
		if args.FailedOperation != "create" || len(args.Errors) > maxOrphanRetries || !namesCreateTask(args.Errors, vmid) {
			return false, nil
		}

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()

		cleared, err := g.clear(ctx, n, vmid, resName, true)
		if err != nil {
			g.warn("node %s: %v", n.Name, err)
		}

		return cleared, nil
	})
	if err != nil {
		return nil, err
	}

	return []pulumi.ResourceOption{pulumi.ResourceHooks(&pulumi.ResourceHookBinding{
		BeforeCreate: []*pulumi.ResourceHook{before},
		OnError:      []*pulumi.ErrorHook{onError},
	})}, nil
}

// namesCreateTask tells whether a create failed on the VM's create task (bpg names its UPID,
// "UPID:<host>:…:qmcreate:<vmid>:<user>:"): the VM may exist although the create failed.
func namesCreateTask(errs []string, vmid int) bool {
	needle := ":qmcreate:" + strconv.Itoa(vmid) + ":"
	for _, e := range errs {
		if strings.Contains(e, needle) {
			return true
		}
	}

	return false
}

// clear destroys the VM at vmid when it is an orphan of node n and tells whether it did. A VM
// there that is not one is an error, except after a failure (quiet: the failure stands).
func (g *VMGuard) clear(ctx context.Context, n spec.Node, vmid int, resName string, afterFailure bool) (bool, error) {
	api := g.api()

	found, err := api.Guest(ctx, vmid)
	if err != nil {
		return false, fmt.Errorf("checking Proxmox for VM id %d before creating node %s's VM: %w", vmid, n.Name, err)
	}

	if found == nil {
		return false, nil
	}

	if found.Name != n.Name || !isOwnVM(g.cluster, found.Tags()) {
		if afterFailure {
			return false, nil
		}

		return false, fmt.Errorf("VM id %d is taken by VM %q on %s, which is not cluster %s's node %s; set nodes.%s.vmId to a free id "+
			"(or move vmIdRange) and run pulumi up again", vmid, found.Name, found.Node, g.cluster, n.Name, n.Name)
	}

	started := found.Status != "stopped"
	if !started {
		if started, err = api.StartedSinceCreated(ctx, found.Node, vmid); err != nil {
			return false, fmt.Errorf("reading the task history of VM %d on %s: %w", vmid, found.Node, err)
		}
	}

	if started || found.Node != n.HostNode {
		if afterFailure {
			return false, nil
		}

		if g.ctx.DryRun() {
			// A preview cannot tell this VM from the one a replacement of the node's VM deletes
			// first (same name, tags and id; deleteBeforeReplace): the up, which runs after that
			// delete, decides.
			g.warn("node %s: VM %d on %s is this node's and has run; unless this preview replaces the node's VM, it is not in the "+
				"stack's state and pulumi up will stop before creating another: %v", n.Name, vmid, found.Node, g.notInState(n, vmid, found, resName))

			return false, nil
		}

		return false, g.notInState(n, vmid, found, resName)
	}

	if g.ctx.DryRun() {
		g.warn("node %s: VM %d on %s was left by a create that failed before the VM was recorded in the state (it never "+
			"started); pulumi up destroys it and creates the node's VM again", n.Name, vmid, found.Node)

		return false, nil
	}

	g.warn("node %s: VM %d on %s was left by a create that failed before the VM was recorded in the state (it never "+
		"started); destroying it so that the node's VM is created again", n.Name, vmid, found.Node)

	if err := api.Destroy(ctx, found.Node, vmid); err != nil {
		return false, fmt.Errorf("destroying VM %d on %s, left by an interrupted create of node %s: %w", vmid, found.Node, n.Name, err)
	}

	return true, nil
}

// notInState is the error for a VM of this node that has run but is not in the state (a lost or
// rolled-back state, or a VM made by hand): nothing is destroyed; the user imports or deletes it.
func (g *VMGuard) notInState(n spec.Node, vmid int, found *pveclient.Guest, resName string) error {
	urn, ok := await.URN(context.Background(), g.comp, 5*time.Second)
	if !ok {
		urn = "<the cluster's URN>"
	}

	return fmt.Errorf("VM %d on %s (%s) is cluster %s's node %s and has run, but it is not in this stack's state (a lost or "+
		"older state, or a VM made by hand); nothing was changed. Adopt it: `pulumi import --generate-code=false --parent "+
		"'cluster=%s' proxmoxve:VM/virtualMachine:VirtualMachine %s %s/%d`; or, if it is not needed, destroy it "+
		"(`qm destroy %d --purge` on %s); then run pulumi up again",
		vmid, found.Node, found.Status, g.cluster, n.Name, urn, resName, found.Node, vmid, vmid, found.Node)
}
