package provider

import (
	"fmt"
	"slices"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/download"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// NewTalosProxmoxCluster builds a Talos Kubernetes cluster on Proxmox VE. It is the
// component's constructor: the provider calls it for every language, and Go programs (including
// Automation API programs) may call it directly as a library.
//
// Every input is validated before anything is registered; an invalid input returns one error
// listing every problem with its property path.
func NewTalosProxmoxCluster(ctx *pulumi.Context, name string, args TalosProxmoxClusterArgs,
	opts ...pulumi.ResourceOption,
) (*TalosProxmoxCluster, error) {
	in, pass, err := specInput(ctx, &args)
	if err != nil {
		return nil, err
	}

	c, specErr := spec.Build(in)

	// Proxmox is asked about the hosts, datastores, VM ids and PCI mappings while the charts
	// render; what it lacks is reported with the other problems, before anything is registered.
	type checked struct {
		problems []error
		inv      *inventory
	}

	inventoryDone := make(chan checked, 1)
	go func() {
		problems, inv := inventoryProblems(ctx, c, specErr, opts)
		inventoryDone <- checked{problems, inv}
	}()

	helm, helmWarnings, err := validateAndRender(ctx.Context(), c, specErr)

	// At preview nothing is created: while Proxmox is asked, the children that do not depend on
	// its answer (image, downloads, secrets) are registered, so the engine works through them
	// meanwhile. At `up` nothing is registered before every problem, Proxmox' included, is known.
	start := func() (*builder, error) {
		b, err := newBuilder(ctx, name, c, pass, helm, slices.Concat(c.Warnings, helmWarnings), opts)
		if err != nil {
			return nil, err
		}

		return b, b.imageAndSecrets()
	}

	var b *builder
	if ctx.DryRun() && err == nil {
		b, err = start()
	}

	inv := <-inventoryDone
	if len(inv.problems) > 0 {
		err = withProblems(err, inv.problems)
	}

	vmIDs, vmIDWarnings, vmIDErr := assignVMIDs(c, inv.inv)
	if vmIDErr != nil {
		err = withProblems(err, []error{vmIDErr})
	}

	if err != nil {
		return nil, err
	}

	if b == nil {
		if b, err = start(); err != nil {
			return nil, err
		}
	}

	for _, w := range vmIDWarnings {
		_ = ctx.Log.Warn(w, &pulumi.LogArgs{Resource: b.comp})
	}

	b.vmIDs, b.inventory = vmIDs, inv.inv

	if err := b.rest(); err != nil {
		return nil, err
	}

	comp := b.comp

	if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{
		"kubeconfig":      comp.Kubeconfig,
		"talosconfig":     comp.Talosconfig,
		"endpoint":        comp.Endpoint,
		"clusterName":     comp.ClusterName,
		"controlPlaneIps": comp.ControlPlaneIps,
		"workerIps":       comp.WorkerIps,
		"nodes":           comp.Nodes,
		"schematicId":     comp.SchematicId,
		"installerImage":  comp.InstallerImage,
		"helmReleases":    comp.HelmReleases,
	}); err != nil {
		return nil, err
	}

	return comp, nil
}

// builder registers the children of one cluster.
type builder struct {
	ctx     *pulumi.Context
	name    string
	comp    *TalosProxmoxCluster
	cluster *spec.Cluster
	plan    *plan.Plan
	// pass is what flows from the inputs to the children as Pulumi inputs; nothing else is read
	// from the arguments after validation.
	pass passThrough
	// helm is the rendered Helm releases, one inline manifest each, Cilium first.
	helm []talosconfig.Manifest

	// nodeIPs is every node's address, by name: plain strings with static addressing, the
	// guest agent's report with DHCP.
	nodeIPs map[string]pulumi.StringOutput
	// vmIDs are the VM ids of the nodes that pin none (vmids.go); empty when Proxmox could not be
	// asked, and Proxmox then chooses.
	vmIDs map[string]int
	// inventory is what Proxmox answered (nil when it could not be asked).
	inventory *inventory
	// guard clears what an interrupted VM create left in Proxmox (orphans.go).
	guard *vmGuard
	// self is the explicit provider of the lifecycle resources (lifecycleProvider).
	self *pulumi.ProviderResourceState
	// downloaded are the image's downloads, one per host that needs one.
	downloaded []*download.File
	vms        map[string]pulumi.Resource
	secrets    *machine.Secrets
	// checked resolves once every node's configuration was generated and validated (with the
	// cluster's secrets and contract, or for a new cluster placeholder secrets, see configCheck);
	// the VMs wait for it.
	checked pulumi.ResourceArrayOutput
	// configs are the checked configurations by node, when they are the ones to apply (static
	// addresses: nothing in them comes from the VMs).
	configs map[string]pulumi.StringOutput
	// manifests is the control planes' manifests patch, in the cluster's contract.
	manifests pulumi.StringOutput
}

func (b *builder) child(suffix string) string { return plan.ResourceName(b.name, suffix) }

func (b *builder) parent() pulumi.ResourceOrInvokeOption { return pulumi.Parent(b.comp) }

// newBuilder registers the component (after every input was checked) with its warnings, and
// returns the builder of its children.
func newBuilder(ctx *pulumi.Context, name string, c *spec.Cluster, pass passThrough, helm []*helmrender.Manifest, warnings []string,
	opts []pulumi.ResourceOption,
) (*builder, error) {
	comp := &TalosProxmoxCluster{}
	if err := ctx.RegisterComponentResource(ClusterToken, name, comp, opts...); err != nil {
		return nil, err
	}

	for _, w := range warnings {
		_ = ctx.Log.Warn(w, &pulumi.LogArgs{Resource: comp})
	}

	comp.HelmReleases = releaseInfos(helm)

	return &builder{ctx: ctx, name: name, comp: comp, cluster: c, plan: plan.Build(c), pass: pass, helm: inlineManifests(helm),
		guard: newVMGuard(ctx, comp, c.Name, opts)}, nil
}

// imageAndSecrets registers what does not depend on Proxmox' inventory: the image, its downloads
// and the machine secrets.
func (b *builder) imageAndSecrets() error {
	schematic, err := b.schematic()
	if err != nil {
		return err
	}

	if b.downloaded, err = b.downloads(schematic); err != nil {
		return err
	}

	return b.machineSecrets()
}

// rest registers the rest, once the inventory (b.inventory, b.vmIDs) is known.
func (b *builder) rest() error {
	b.checked = b.configCheck()

	if err := b.virtualMachines(b.downloaded); err != nil {
		return err
	}

	return b.talos()
}

// endpointHost is the API endpoint host: known up front unless it is the first control plane
// of a DHCP cluster.
func (b *builder) endpointHost() pulumi.StringOutput {
	if b.cluster.Endpoint != "" {
		return pulumi.String(b.cluster.Endpoint).ToStringOutput()
	}

	return b.nodeIPs[b.cluster.BootstrapNode().Name]
}

// ips returns the addresses of nodes, in order.
func (b *builder) ips(nodes []spec.Node) pulumi.StringArrayOutput {
	var arr pulumi.StringArray
	for _, n := range nodes {
		arr = append(arr, b.nodeIPs[n.Name])
	}

	if arr == nil {
		return pulumi.ToStringArray([]string{}).ToStringArrayOutput()
	}

	return arr.ToStringArrayOutput()
}

// nodePatch is the component's patch for a node, once the addresses it needs are known.
func (b *builder) nodePatch(n spec.Node, contract pulumi.StringOutput) pulumi.StringOutput {
	c := b.cluster

	return pulumi.All(b.nodeIPs[n.Name], b.ips(c.ControlPlanes()), b.endpointHost(), contract).ApplyT(
		func(v []any) (string, error) {
			return talosconfig.NodePatch(c, n, talosconfig.Addresses{
				NodeIP: v[0].(string), ControlPlaneIPs: v[1].([]string), Endpoint: v[2].(string),
			}, v[3].(string))
		}).(pulumi.StringOutput)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
