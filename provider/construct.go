package provider

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/proxmox"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/wire"
)

// NewTalosProxmoxCluster builds a Talos Kubernetes cluster on Proxmox VE. It is the
// component's constructor: the provider calls it for every language, and Go programs (including
// Automation API programs) may call it directly as a library.
//
// Every input is validated before anything is created; an invalid input returns one error
// listing every problem with its property path. (A running cluster's checks against the
// Kubernetes version it runs come after the registrations it already has — the component, the
// image, the secrets, the version record — which change nothing.)
//
// It is the one place that calls the wiring's stages, in order: convert the arguments, build the
// spec, check it against Proxmox (while the charts render), register the component, then the
// image and secrets, the record of the Kubernetes version the cluster runs (read back, and the
// spec finished with it: a running cluster keeps its version), the configuration check, the VMs,
// the Talos side and the day-2 resources, each stage taking the results of the ones before.
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
		inv      *proxmox.Inventory
	}

	inventoryDone := make(chan checked, 1)
	go func() {
		problems, inv := proxmox.Check(ctx, c, specErr, opts)
		inventoryDone <- checked{problems, inv}
	}()

	// And the Image Factory whether it publishes the images' extensions for the Talos version.
	type catalogued struct {
		problems []error
		warning  string
	}

	catalogueDone := make(chan catalogued, 1)
	go func() {
		problems, warning := checkExtensions(ctx.Context(), c)
		catalogueDone <- catalogued{problems, warning}
	}()

	// The charts render for the Kubernetes version Build gave: kubernetesVersion, else the default
	// of the Talos minor, which is what a new cluster records. A running cluster that leaves
	// kubernetesVersion unset runs the version it recorded instead: for it the charts render again
	// once the record is read (a render-cache hit after the first time), and only the problems of
	// that render count.
	helm, helmWarnings, renderErr := validateAndRender(ctx.Context(), c, specErr)

	// At preview nothing is created: while Proxmox is asked, the children that do not depend on
	// its answer (image, downloads, secrets) are registered, so the engine works through them
	// meanwhile. At `up` nothing is registered before every problem, Proxmox' included, is known.
	//
	// A cluster to adopt (secrets.bundle) starts after Proxmox and its nodes were asked: its
	// secrets keep the configuration contract its nodes run.
	var early *started
	if ctx.DryRun() && renderErr == nil && c.Secrets == nil {
		early, err = start(ctx, name, c, pass, nil, opts)
	}

	inv := <-inventoryDone
	fresh := inv.inv.IsNew(c.Name)

	// The Kubernetes version the charts rendered for is the cluster's when kubernetesVersion is
	// set or the cluster is new (Proxmox holds none of its VMs). A running cluster's record may
	// say otherwise: then what fails already at fetching the charts is reported now, the rest once
	// the charts rendered for the version the cluster runs. (start ran only without a render
	// error, so err is nil when renderErr is not.)
	switch {
	case renderErr == nil:
	case specErr != nil || c.KubernetesDeclared || fresh:
		err = renderErr
	default:
		err = fetchCharts(ctx.Context(), c)
	}

	if len(inv.problems) > 0 {
		err = withProblems(err, inv.problems)
	}

	if cat := <-catalogueDone; len(cat.problems) > 0 {
		err = withProblems(err, cat.problems)
	} else if cat.warning != "" {
		_ = ctx.Log.Warn(cat.warning, nil)
	}

	vmIDs, vmIDWarnings, vmIDErr := proxmox.AssignVMIDs(c, inv.inv)
	if vmIDErr != nil {
		err = withProblems(err, []error{vmIDErr})
	}

	// A plan that leaves no control plane of the running cluster in place loses etcd's data
	// unless the cluster says how it survives: refused with the other problems.
	loss := inv.inv.EtcdLoss(c)
	if specErr == nil {
		if lossErr := c.CheckDataLoss(loss); lossErr != nil {
			err = withProblems(err, []error{lossErr})
		}

		problems, warnings := inv.inv.AdoptedSecurityChanges(c)
		if len(problems) > 0 {
			err = withProblems(err, problems)
		}

		for _, w := range warnings {
			_ = ctx.Log.Warn(w, nil)
		}
	}

	if err != nil {
		return nil, err
	}

	// The snapshot a recovery restores is read before anything is registered at `up` (and looked
	// for at preview): a missing, undecryptable or corrupt one fails here, with no VM touched.
	if err := checkRecovery(ctx, c, inv.inv, loss); err != nil {
		return nil, err
	}

	// A running cluster to adopt is read (its VMs from Proxmox, its nodes through their Talos
	// API with the bundle) before anything is registered: a bundle of another cluster, or a VM
	// the declaration would shrink or strip of a disk, fails here. Adopted, it is not new, and it
	// keeps the Kubernetes version it runs unless kubernetesVersion says otherwise.
	adopted, err := checkAdoption(ctx, c, inv.inv, plan.Build(c), opts)
	if err != nil {
		return nil, err
	}

	// The kubelets of a cluster with the Proxmox CCM name their VMs by these ids (an adopted
	// node's VM keeps its own).
	c.AssignedVMIDs = maps.Clone(vmIDs)
	for n, a := range adopted.adoptees {
		if c.AssignedVMIDs == nil {
			c.AssignedVMIDs = map[string]int{}
		}

		c.AssignedVMIDs[n] = a.VMID
	}

	if len(adopted.adoptees) > 0 {
		fresh = false

		if adopted.kubernetes != "" && adopted.kubernetes != c.KubernetesVersion {
			if c, err = c.RunningKubernetes(adopted.kubernetes); err != nil {
				return nil, err
			}

			if helm, helmWarnings, err = validateAndRender(ctx.Context(), c, nil); err != nil {
				return nil, err
			}
		}
	}

	if early == nil {
		if early, err = start(ctx, name, c, pass, adopted, opts); err != nil {
			return nil, err
		}
	}

	// The Kubernetes version the cluster runs, from its record: with kubernetesVersion unset a
	// running cluster keeps the one it recorded, whatever talosVersion says. A version the Talos
	// minor does not run is refused here, at preview, before any VM or node is touched; the
	// registrations so far (the component, the lifecycle provider, the image, the secrets and the
	// record) are a running cluster's own, unchanged.
	recorded, err := wire.RecordKubernetes(early.scope, fresh, early.self)
	if err != nil {
		return nil, err
	}

	// A new name makes a new cluster (new VMs, secrets for it, an empty etcd) and deletes this
	// one with its data: refused unless allowDataLoss accepts it.
	if recorded.ClusterName != "" && recorded.ClusterName != c.Name && !c.AllowDataLoss {
		return nil, fmt.Errorf("clusterName: this cluster was created as %q; a new name makes a new cluster with an "+
			"empty etcd and deletes this one with every Kubernetes object. Keep clusterName %q, or set allowDataLoss: "+
			"true to replace the cluster (take a snapshot first with etcdBackup.snapshotNow to keep its data)",
			recorded.ClusterName, recorded.ClusterName)
	}

	cluster, runErr := c.RunningKubernetes(recorded.KubernetesVersion)
	if runErr != nil || cluster.KubernetesVersion != c.KubernetesVersion {
		helm, helmWarnings, renderErr = validateAndRender(ctx.Context(), cluster, runErr)
	}

	if renderErr != nil {
		return nil, renderErr
	}

	// From here on every stage sees the cluster as it runs.
	s, comp := early.scope, early.comp
	s.Cluster = cluster

	for _, w := range slices.Concat(helmWarnings, vmIDWarnings) {
		_ = ctx.Log.Warn(w, &pulumi.LogArgs{Resource: comp})
	}

	comp.HelmReleases = releaseInfos(helm)

	manifests := append(inlineManifests(helm), gpuManifests(cluster)...)
	if m, ok, err := backupManifest(cluster); err != nil {
		return nil, err
	} else if ok {
		manifests = append(manifests, m)
	}
	// The Proxmox tokens of the CSI plugin and the CCM, whose Secrets join the manifests.
	tokens := &wire.Tokens{}
	if len(cluster.ProxmoxTokens) > 0 {
		url, insecure := proxmox.Endpoint(ctx, opts)
		if tokens, err = wire.ProxmoxTokens(s, wire.ProxmoxAPI{Endpoint: url, Insecure: insecure}); err != nil {
			return nil, err
		}

		pass.Generated = tokens.Manifests
	}

	configs := wire.CheckConfigs(s, early.secrets, pass, manifests, fresh)
	self := early.self

	// The etcd snapshot of this `up` comes before any VM is replaced, where the control planes'
	// addresses are known without their VMs (static addressing); with DHCP it comes after the VMs.
	var backup *wire.Backup

	var snapshotFirst []pulumi.Resource

	if !cluster.Network.DHCP {
		if backup, err = wire.EtcdBackup(s, early.secrets, inv.inv, wire.StaticAddresses(cluster), fresh, loss, self); err != nil {
			return nil, err
		}

		if !fresh {
			snapshotFirst = backup.Before
		}
	}

	machines, err := wire.VirtualMachines(s, early.plan, early.images, vmIDs, inv.inv, adopted.adoptees, proxmox.NewVMGuard(ctx, comp, cluster.Name, opts),
		configs.Checked, snapshotFirst, self)
	if err != nil {
		return nil, err
	}

	if err := wire.TokenACLs(s, tokens, machines); err != nil {
		return nil, err
	}

	if backup == nil {
		if backup, err = wire.EtcdBackup(s, early.secrets, inv.inv, machines.Addresses, fresh, loss, self); err != nil {
			return nil, err
		}
	}

	running, err := wire.Talos(s, early.secrets, machines, configs, backup, pass, self)
	if err != nil {
		return nil, err
	}

	describeAdoptedConfigs(ctx, comp, cluster, adopted, running.ConfigOf)

	order := wire.ControlPlaneOrder(s, inv.inv, machines.Addresses, running)

	operated, err := wire.Operate(s, machines, running, order, fresh, manifests, pass, self)
	if err != nil {
		return nil, err
	}

	comp.ControlPlaneIps = machines.Addresses.Of(cluster.ControlPlanes())
	comp.WorkerIps = machines.Addresses.Of(cluster.Workers())
	comp.Nodes = nodeInfos(cluster, machines)
	comp.Endpoint = running.Endpoint
	comp.ClusterName = pulumi.String(cluster.Name).ToStringOutput()
	comp.Kubeconfig = operated.Kubeconfig
	comp.Talosconfig = operated.Talosconfig
	comp.LastEtcdSnapshot = lastSnapshot(backup)
	comp.FluxDeployKey = operated.FluxDeployKey

	if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{
		"kubeconfig":       comp.Kubeconfig,
		"talosconfig":      comp.Talosconfig,
		"endpoint":         comp.Endpoint,
		"clusterName":      comp.ClusterName,
		"controlPlaneIps":  comp.ControlPlaneIps,
		"workerIps":        comp.WorkerIps,
		"nodes":            comp.Nodes,
		"schematicId":      comp.SchematicId,
		"installerImage":   comp.InstallerImage,
		"helmReleases":     comp.HelmReleases,
		"lastEtcdSnapshot": comp.LastEtcdSnapshot,
		"fluxDeployKey":    comp.FluxDeployKey,
	}); err != nil {
		return nil, err
	}

	return comp, nil
}

// started is what start registered: the component, the plugin's own provider for the lifecycle
// resources, and what does not depend on Proxmox' inventory (the image, its downloads and the
// machine secrets).
type started struct {
	comp    *TalosProxmoxCluster
	scope   wire.Scope
	self    wire.Lifecycle
	plan    *plan.Plan
	images  []wire.ImageFile
	secrets *wire.Secrets
}

// start registers the component (after every input was checked) with the spec's warnings, the
// lifecycle provider (its plugin then starts while the rest is wired), the image, its downloads
// and the machine secrets: generated, or secrets.bundle's. An adopted cluster (adopted; nil for a
// new one) keeps the contract its nodes run (or the spec's when unknown) and the Talos images its
// tool left on the hosts.
func start(ctx *pulumi.Context, name string, c *spec.Cluster, pass wire.PassThrough, adopted *adoption, opts []pulumi.ResourceOption) (*started, error) {
	comp := &TalosProxmoxCluster{}
	if err := ctx.RegisterComponentResource(ClusterToken, name, comp, opts...); err != nil {
		return nil, err
	}

	for _, w := range c.Warnings {
		_ = ctx.Log.Warn(w, &pulumi.LogArgs{Resource: comp})
	}

	comp.SchematicId = pulumi.String(c.Image.SchematicID).ToStringOutput()
	comp.InstallerImage = pulumi.String(c.Image.InstallerImage).ToStringOutput()

	s := wire.Scope{Ctx: ctx, Name: name, Parent: comp, Cluster: c}

	self, err := wire.LifecycleProvider(s, Name, Version)
	if err != nil {
		return nil, err
	}

	p := plan.Build(c)

	contract := c.ConfigContract
	if adopted != nil {
		p.Reuse(adopted.images)
		contract = cmp.Or(adopted.contract, contract)
	}

	images, err := wire.Image(s, p)
	if err != nil {
		return nil, err
	}

	var secrets *wire.Secrets
	if c.Secrets != nil {
		secrets, err = wire.AdoptedSecrets(s, pass, contract, self)
	} else {
		secrets, err = wire.MachineSecrets(s)
	}

	if err != nil {
		return nil, err
	}

	return &started{comp: comp, scope: s, self: self, plan: p, images: images, secrets: secrets}, nil
}

// nodeInfos is the nodes output: every node's VM id, address, host and role.
func nodeInfos(c *spec.Cluster, m *wire.Machines) MapOutput[NodeInfo] {
	inputs := make([]any, 0, 2*len(c.Nodes))
	for _, n := range c.Nodes {
		inputs = append(inputs, m.VMIDs[n.Name], m.Addresses[n.Name])
	}

	nodes := c.Nodes

	return pulumi.All(inputs...).ApplyT(func(v []any) map[string]NodeInfo {
		out := map[string]NodeInfo{}
		for i, n := range nodes {
			out[n.Name] = NodeInfo{VmId: v[2*i].(int), Ip: v[2*i+1].(string), HostNode: n.HostNode, Role: string(n.Role)}
		}

		return out
	}).(MapOutput[NodeInfo])
}

// withProblems adds problems to err: to its ValidationError, or as a new one.
func withProblems(err error, problems []error) error {
	var invalid *spec.ValidationError

	switch {
	case err == nil:
		return &spec.ValidationError{Errors: problems}
	case errors.As(err, &invalid):
		invalid.Add(problems...)
		return invalid
	default:
		return errors.Join(append([]error{err}, problems...)...)
	}
}
