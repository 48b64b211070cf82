package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// Tokens of the custom resources the plugin serves beside the component (provider/lifecycle).
const (
	nodeUpgradeToken       = Name + ":lifecycle:NodeUpgrade"
	clusterHealthToken     = Name + ":lifecycle:ClusterHealth"
	membershipToken        = Name + ":lifecycle:Membership"
	nodeRetireToken        = Name + ":lifecycle:NodeRetire"
	manifestSyncToken      = Name + ":lifecycle:ManifestSync"
	kubernetesToken        = Name + ":lifecycle:KubernetesUpgrade"
	nodeConfigToken        = Name + ":lifecycle:NodeConfig"
	nodeAddressToken       = Name + ":lifecycle:NodeAddress"
	clientCredentialsToken = Name + ":lifecycle:ClientCredentials"
)

// running is what the Talos step hands to the day-2 step.
type running struct {
	applies     map[string]pulumi.Resource
	configs     pulumi.StringArray
	configOf    map[string]pulumi.StringOutput
	ready       []pulumi.Resource // bootstrap and kubeconfig
	kubeconfig  pulumi.StringOutput
	talosconfig pulumi.StringOutput
}

// nodeUpgrade and clusterHealth are the Go views of the lifecycle resources.
type nodeUpgrade struct {
	pulumi.CustomResourceState

	RunningVersion pulumi.StringOutput `pulumi:"runningVersion"`
}

type clusterHealth struct {
	pulumi.CustomResourceState

	Kubeconfig  pulumi.StringOutput `pulumi:"kubeconfig"`
	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
}

// lifecycleProvider is the option that serves a lifecycle resource: an explicit provider of this
// plugin, at this version (the engine's default provider for it is unknown to the engine when a
// replaced NodeUpgrade is deleted first: "unknown provider …default_0_1_0…"). Registered once.
func (b *builder) lifecycleProvider() (pulumi.ResourceOption, error) {
	if b.self == nil {
		var self pulumi.ProviderResourceState
		if err := b.ctx.RegisterResource("pulumi:providers:"+Name, b.child("lifecycle"), pulumi.Map{}, &self,
			b.parent(), pulumi.Version(Version)); err != nil {
			return nil, errorf("registering the %s provider: %w", Name, err)
		}

		b.self = &self
	}

	return pulumi.Provider(b.self), nil
}

// operate registers one NodeUpgrade per node, chained so the engine upgrades control planes one
// at a time and then workers upgrade.maxParallel at a time (a failed node stops the chain), and
// the health gate after all of them. The outputs come through the gate.
func (b *builder) operate(r running) error {
	c := b.cluster

	cps := pulumi.StringMap{}
	workers := pulumi.StringMap{}

	for _, n := range c.Nodes {
		if n.Role == spec.RoleControlPlane {
			cps[n.Name] = b.nodeIPs[n.Name]
		} else {
			workers[n.Name] = b.nodeIPs[n.Name]
		}
	}

	version, err := b.lifecycleProvider()
	if err != nil {
		return err
	}

	order := b.controlPlaneOrder(r)

	upgrades, err := b.rollout(order, true, func(n spec.Node, after []pulumi.Resource) (pulumi.Resource, error) {
		deps := slices.Concat([]pulumi.Resource{r.applies[n.Name]}, r.ready, after)

		var u nodeUpgrade
		if err := b.ctx.RegisterResource(nodeUpgradeToken, b.child(n.Name+"-upgrade"), b.nodeInputs(r, n, pulumi.Map{
			"controlPlanes":  cps,
			"talosVersion":   pulumi.String(c.TalosVersion),
			"schematicId":    pulumi.String(c.Image.SchematicID),
			"installerImage": pulumi.String(c.Image.InstallerImage),
			"drain":          pulumi.Bool(c.Upgrade.Drain),
			"drainTimeout":   pulumi.String(c.Upgrade.DrainTimeout.String()),
			"timeout":        pulumi.String(c.Upgrade.Timeout.String()),
			"checkReady":     pulumi.Bool(c.Health.RequireNodesReady),
			"allowDowngrade": pulumi.Bool(c.Upgrade.AllowDowngrade),
		}), &u, b.parent(), version, pulumi.DependsOn(deps),
			// A new VM is a new node: its record starts again.
			pulumi.ReplaceWith([]pulumi.Resource{b.vms[n.Name]}),
		); err != nil {
			return nil, errorf("registering the upgrade of node %s: %w", n.Name, err)
		}

		return &u, nil
	})
	if err != nil {
		return err
	}

	configured, err := b.reconfigure(r, version, workers, cps, order, upgrades)
	if err != nil {
		return err
	}

	revision := pulumi.All(r.configs.ToStringArrayOutput(), pulumi.String(c.Image.InstallerImage), pulumi.String(c.KubernetesVersion)).ApplyT(
		func(v []any) string {
			h := sha256.New()
			for _, cfg := range v[0].([]string) {
				h.Write([]byte(cfg))
				h.Write([]byte{0})
			}

			h.Write([]byte(v[1].(string) + "\x00" + v[2].(string)))

			return hex.EncodeToString(h.Sum(nil))
		}).(pulumi.StringOutput)

	members := pulumi.Map{}
	for _, n := range c.Nodes {
		members[n.Name] = pulumi.Map{"address": b.nodeIPs[n.Name], "controlPlane": pulumi.Bool(n.Role == spec.RoleControlPlane)}
	}

	retires, err := b.retires(r, version)
	if err != nil {
		return err
	}

	// Nodes that leave `nodes` are taken out of the cluster here, after the upgrades and before
	// the gate; the engine deletes their VMs after that.
	var membership pulumi.CustomResourceState
	if err := b.ctx.RegisterResource(membershipToken, b.child("membership"), pulumi.Map{
		"talosconfig":  r.talosconfig,
		"kubeconfig":   r.kubeconfig,
		"nodes":        members,
		"drainTimeout": pulumi.String(c.Upgrade.DrainTimeout.String()),
		"timeout":      pulumi.String(c.Upgrade.Timeout.String()),
	}, &membership, b.parent(), version, pulumi.DependsOn(slices.Concat(upgrades, r.ready, retires, configured))); err != nil {
		return errorf("registering the membership: %w", err)
	}

	var health clusterHealth
	if err := b.ctx.RegisterResource(clusterHealthToken, b.child("health"), pulumi.Map{
		"talosconfig":       r.talosconfig,
		"kubeconfig":        r.kubeconfig,
		"controlPlanes":     cps,
		"workers":           workers,
		"requireNodesReady": pulumi.Bool(c.Health.RequireNodesReady),
		"timeout":           pulumi.String(c.Health.Timeout.String()),
		"revision":          revision,
		"kubernetesVersion": pulumi.String(c.KubernetesVersion),
	}, &health, b.parent(), version, pulumi.DependsOn(append(upgrades, &membership))); err != nil {
		return errorf("registering the health gate: %w", err)
	}

	if !c.Health.RequireNodesReady {
		_ = b.ctx.Log.Info("health: the CNI is none and no CNI manifest is given, so the gate does not wait for Nodes "+
			"to be Ready (set health.requireNodesReady once you deploy a CNI)", &pulumi.LogArgs{Resource: b.comp})
	}

	if c.ManifestSync.Enabled {
		if err := b.syncManifests(&health, version); err != nil {
			return err
		}
	}

	b.comp.Kubeconfig = pulumi.ToSecret(health.Kubeconfig).(pulumi.StringOutput)
	b.comp.Talosconfig = pulumi.ToSecret(health.Talosconfig).(pulumi.StringOutput)

	return nil
}

// syncManifests registers the manifest sync after the health gate: the same manifests as the
// control planes' inlineManifests (Helm releases, then the inline manifests) and extraManifests.
func (b *builder) syncManifests(health *clusterHealth, provider pulumi.ResourceOption) error {
	c := b.cluster

	manifests := pulumi.StringMap{}
	for _, m := range b.helm {
		manifests[m.Name] = pulumi.String(m.Contents)
	}

	for i, m := range c.InlineManifests {
		manifests[m.Name] = b.pass.ManifestContents[i]
	}

	extra := pulumi.StringArray{}
	for _, u := range c.ExtraManifests {
		extra = append(extra, pulumi.String(u))
	}

	var sync pulumi.CustomResourceState
	if err := b.ctx.RegisterResource(manifestSyncToken, b.child("manifests"), pulumi.Map{
		"kubeconfig":             health.Kubeconfig,
		"manifests":              manifests,
		"extraManifests":         extra,
		"namespaces":             pulumi.ToStringMap(c.ExtraManifestNamespaces),
		"pruneCrdsAndNamespaces": pulumi.Bool(c.ManifestSync.PruneCrdsAndNamespaces),
		"force":                  pulumi.Bool(c.ManifestSync.Force),
		"timeout":                pulumi.String(c.ManifestSync.Timeout.String()),
	}, &sync, b.parent(), provider, pulumi.DependsOn([]pulumi.Resource{health})); err != nil {
		return errorf("registering the manifest sync: %w", err)
	}

	return nil
}

// retires registers one NodeRetire per node: replaced with the node's VM and deleted before it,
// so a node kept under its name on a new VM leaves the cluster first. The membership depends on
// them, so on a teardown its delete (which marks the teardown) comes first and theirs do nothing.
func (b *builder) retires(r running, provider pulumi.ResourceOption) ([]pulumi.Resource, error) {
	c := b.cluster
	out := make([]pulumi.Resource, 0, len(c.Nodes))

	for _, n := range c.Nodes {
		var res pulumi.CustomResourceState
		if err := b.ctx.RegisterResource(nodeRetireToken, b.child(n.Name+"-retire"), b.nodeInputs(r, n, pulumi.Map{
			"drainTimeout": pulumi.String(c.Upgrade.DrainTimeout.String()),
			"timeout":      pulumi.String(c.Upgrade.Timeout.String()),
		}), &res, b.parent(), provider, pulumi.DependsOn(append([]pulumi.Resource{r.applies[n.Name]}, r.ready...)),
			pulumi.ReplaceWith([]pulumi.Resource{b.vms[n.Name]}),
		); err != nil {
			return nil, errorf("registering the retirement of node %s: %w", n.Name, err)
		}

		out = append(out, &res)
	}

	return out, nil
}

// nodeInputs are the inputs every per-node lifecycle resource takes (how to reach the cluster and
// the node), with the resource's own.
func (b *builder) nodeInputs(r running, n spec.Node, own pulumi.Map) pulumi.Map {
	own["talosconfig"], own["kubeconfig"] = r.talosconfig, r.kubeconfig
	own["node"], own["address"] = pulumi.String(n.Name), b.nodeIPs[n.Name]
	own["controlPlane"] = pulumi.Bool(n.Role == spec.RoleControlPlane)

	return own
}

// reconfigure registers, after the OS upgrades, the Kubernetes upgrade and then one NodeConfig
// per node, chained like the upgrades (control planes one at a time, workers upgrade.maxParallel
// at a time): a kubernetesVersion change moves component by component as upgrade-k8s does, and
// any other configuration change reaches one node at a time. It returns the NodeConfigs and the Kubernetes upgrade.
func (b *builder) reconfigure(r running, provider pulumi.ResourceOption, workers, cps pulumi.StringMap, order []spec.Node,
	upgrades []pulumi.Resource,
) ([]pulumi.Resource, error) {
	c := b.cluster

	var k8s pulumi.CustomResourceState
	if err := b.ctx.RegisterResource(kubernetesToken, b.child("kubernetes"), pulumi.Map{
		"talosconfig":       r.talosconfig,
		"kubeconfig":        r.kubeconfig,
		"controlPlanes":     cps,
		"workers":           workers,
		"kubernetesVersion": pulumi.String(c.KubernetesVersion),
		"timeout":           pulumi.String(c.Upgrade.Timeout.String()),
	}, &k8s, b.parent(), provider, pulumi.DependsOn(append(slices.Clone(upgrades), r.ready...))); err != nil {
		return nil, errorf("registering the Kubernetes upgrade: %w", err)
	}

	fresh := b.isNew()

	configs, err := b.rollout(order, false, func(n spec.Node, after []pulumi.Resource) (pulumi.Resource, error) {
		deps := append([]pulumi.Resource{r.applies[n.Name]}, after...)
		if !fresh {
			deps = append(deps, &k8s)
		}

		var res pulumi.CustomResourceState
		if err := b.ctx.RegisterResource(nodeConfigToken, b.child(n.Name+"-node-config"), b.nodeInputs(r, n, pulumi.Map{
			"controlPlanes": cps,
			"configuration": pulumi.ToSecret(r.configOf[n.Name]),
			"checkReady":    pulumi.Bool(c.Health.RequireNodesReady),
			"timeout":       pulumi.String(c.Upgrade.Timeout.String()),
		}), &res, b.parent(), provider, pulumi.DependsOn(deps),
			// A new VM is configured by its ConfigurationApply: the record starts again.
			pulumi.ReplaceWith([]pulumi.Resource{b.vms[n.Name]}),
		); err != nil {
			return nil, errorf("registering the configuration of running node %s: %w", n.Name, err)
		}

		return &res, nil
	})
	if err != nil {
		return nil, err
	}

	// For a new cluster the configurations do not wait for the Kubernetes record: what waits for
	// them (the membership, then the health gate) waits for it too.
	return append(configs, &k8s), nil
}

// rollout registers one step per node in rollout order through register, which gets the steps
// the node's must wait for: control planes one at a time in the order given (leader last, see
// controlPlaneOrder), then workers upgrade.maxParallel at a time, each after the last control
// plane. It returns the steps.
//
// A new cluster (no VM of it in Proxmox) has nothing running that the order protects, and its
// steps' creates only record what each node runs: they go at once, except that with cpsInTurn
// the control planes still go one at a time (a NodeUpgrade's create upgrades a node that does not
// run the target, which a node installed from the target image does; should one not, etcd still
// loses one member at a time). Chaining them cost a Pulumi step per node on every create.
func (b *builder) rollout(cps []spec.Node, cpsInTurn bool, register func(n spec.Node, after []pulumi.Resource) (pulumi.Resource, error)) ([]pulumi.Resource, error) {
	c := b.cluster
	fresh := b.isNew()
	out := make([]pulumi.Resource, 0, len(c.Nodes))
	lanes := make([]pulumi.Resource, c.Upgrade.MaxParallel)

	var lastCP pulumi.Resource

	worker := 0

	for _, n := range slices.Concat(cps, c.Workers()) {
		var after []pulumi.Resource

		// The step this node waits for and then takes the place of; nil: it waits for none.
		lane := &lastCP

		switch {
		case n.Role == spec.RoleWorker && fresh, n.Role == spec.RoleControlPlane && fresh && !cpsInTurn:
			lane = nil
		case n.Role == spec.RoleWorker:
			lane = &lanes[worker%len(lanes)]
			worker++

			if lastCP != nil {
				after = append(after, lastCP)
			}
		}

		if lane != nil && *lane != nil {
			after = append(after, *lane)
		}

		step, err := register(n, after)
		if err != nil {
			return nil, err
		}

		if lane != nil {
			*lane = step
		}

		out = append(out, step)
	}

	return out, nil
}
