package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/redact"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/lifecycle"
)

// Operated is what Operate returns: the admin credentials, through the health gate, and the
// public half of Flux's deploy key (empty without one).
type Operated struct {
	Kubeconfig    pulumi.StringOutput
	Talosconfig   pulumi.StringOutput
	FluxDeployKey pulumi.StringOutput
}

// operation is one Operate call's view of the cluster, read-only.
type operation struct {
	s     Scope
	m     *Machines
	r     *Running
	fresh bool
	self  pulumi.ResourceOption
}

// Operate registers the resources that operate the running cluster: one NodeUpgrade per node,
// chained so the engine upgrades control planes one at a time in order (ControlPlaneOrder) and
// then workers upgrade.maxParallel at a time (a failed node stops the chain); then the Kubernetes
// upgrade and one NodeConfig per node, chained the same way; the retirements and membership of
// nodes that leave; the health gate after all of them; and the manifest sync after the gate.
// The admin credentials come out through the gate. fresh tells a new cluster (Proxmox holds none
// of its VMs): its steps only record what each node runs, so they are not chained.
func Operate(s Scope, m *Machines, r *Running, order []spec.Node, fresh bool, helm []talosconfig.Manifest, pass PassThrough,
	self Lifecycle,
) (*Operated, error) {
	b := operation{s: s, m: m, r: r, fresh: fresh, self: self.option}
	c := s.Cluster

	cps := pulumi.StringMap{}
	workers := pulumi.StringMap{}

	for _, n := range c.Nodes {
		if n.Role == spec.RoleControlPlane {
			cps[n.Name] = m.Addresses[n.Name]
		} else {
			workers[n.Name] = m.Addresses[n.Name]
		}
	}

	upgrades, err := b.rollout(order, true, func(n spec.Node, after []pulumi.Resource) (pulumi.Resource, error) {
		deps := slices.Concat([]pulumi.Resource{r.Applies[n.Name]}, r.Ready, after)

		in, a := lifecycle.NodeUpgradeKind.Inputs()
		setAccess(in, &a.ClusterAccess, r)
		setNodeRef(in, &a.NodeRef, n, m)
		lifecycle.Set(in, &a.ControlPlanes, cps)
		lifecycle.Set(in, &a.TalosVersion, pulumi.String(c.TalosVersion))
		lifecycle.Set(in, &a.SchematicId, pulumi.String(c.ImageOf(n).SchematicID))
		lifecycle.Set(in, &a.InstallerImage, pulumi.String(c.ImageOf(n).InstallerImage))
		lifecycle.Set(in, &a.Drain, pulumi.Bool(c.Upgrade.Drain))
		lifecycle.Set(in, &a.DrainTimeout, pulumi.String(c.Upgrade.DrainTimeout.String()))
		lifecycle.Set(in, &a.Timeout, pulumi.String(c.Upgrade.Timeout.String()))
		lifecycle.Set(in, &a.CheckReady, pulumi.Bool(c.Health.RequireNodesReady))
		lifecycle.Set(in, &a.AllowDowngrade, pulumi.Bool(c.Upgrade.AllowDowngrade))

		// A new VM is a new node: its record starts again.
		u, err := lifecycle.NodeUpgradeKind.Register(s.Ctx, s.child(n.Name+"-upgrade"), in,
			append([]pulumi.ResourceOption{s.parent(), b.self, pulumi.DependsOn(deps)}, m.Instance(n.Name)...)...)
		if err != nil {
			return nil, errorf("registering the upgrade of node %s: %w", n.Name, err)
		}

		return u, nil
	})
	if err != nil {
		return nil, err
	}

	configured, err := b.reconfigure(workers, cps, order, upgrades)
	if err != nil {
		return nil, err
	}

	// The gate runs again whenever the configurations, the image or the Kubernetes version change,
	// and whenever a node's VM is a new one (replaced, or created again after it was lost).
	var instances pulumi.StringArray
	for _, n := range c.Nodes {
		instances = append(instances, pulumi.String(m.instances[n.Name]))
	}

	// Every image's installer (the cluster's alone, as before node images, when no node has its own).
	var installers []string
	for _, img := range c.Images() {
		installers = append(installers, img.InstallerImage)
	}

	revision := pulumi.All(r.Configs.ToStringArrayOutput(), pulumi.String(strings.Join(installers, " ")), pulumi.String(c.KubernetesVersion),
		instances.ToStringArrayOutput()).ApplyT(
		func(v []any) string {
			h := sha256.New()
			for _, part := range slices.Concat(v[0].([]string), []string{v[1].(string), v[2].(string)}, v[3].([]string)) {
				h.Write([]byte(part))
				h.Write([]byte{0})
			}

			return hex.EncodeToString(h.Sum(nil))
		}).(pulumi.StringOutput)

	members := map[string]*lifecycle.Inputs[lifecycle.MemberNode]{}
	for _, n := range c.Nodes {
		in, a := lifecycle.NewInputs[lifecycle.MemberNode]()
		lifecycle.Set(in, &a.Address, m.Addresses[n.Name])
		lifecycle.Set(in, &a.ControlPlane, pulumi.Bool(n.Role == spec.RoleControlPlane))
		members[n.Name] = in
	}

	retires, err := b.retires()
	if err != nil {
		return nil, err
	}

	// Nodes that leave `nodes` are taken out of the cluster here, after the upgrades and before
	// the gate; the engine deletes their VMs after that.
	in, a := lifecycle.MembershipKind.Inputs()
	setAccess(in, &a.ClusterAccess, r)
	lifecycle.SetEach(in, &a.Nodes, members)
	lifecycle.Set(in, &a.DrainTimeout, pulumi.String(c.Upgrade.DrainTimeout.String()))
	lifecycle.Set(in, &a.Timeout, pulumi.String(c.Upgrade.Timeout.String()))

	membership, err := lifecycle.MembershipKind.Register(s.Ctx, s.child("membership"), in, s.parent(), b.self, pulumi.DependsOn(slices.Concat(upgrades, r.Ready, retires, configured)))
	if err != nil {
		return nil, errorf("registering the membership: %w", err)
	}

	gate, g := lifecycle.ClusterHealthKind.Inputs()
	setAccess(gate, &g.ClusterAccess, r)
	lifecycle.Set(gate, &g.ControlPlanes, cps)
	lifecycle.Set(gate, &g.Workers, workers)
	lifecycle.Set(gate, &g.RequireNodesReady, pulumi.Bool(c.Health.RequireNodesReady))
	lifecycle.Set(gate, &g.Timeout, pulumi.String(c.Health.Timeout.String()))
	lifecycle.Set(gate, &g.Revision, revision)
	lifecycle.Set(gate, &g.KubernetesVersion, pulumi.String(c.KubernetesVersion))

	health, err := lifecycle.ClusterHealthKind.Register(s.Ctx, s.child("health"), gate, s.parent(), b.self, pulumi.DependsOn(append(upgrades, membership)))
	if err != nil {
		return nil, errorf("registering the health gate: %w", err)
	}

	if !c.Health.RequireNodesReady {
		s.info("health: the CNI is none and no CNI manifest is given, so the gate does not wait for Nodes " +
			"to be Ready (set health.requireNodesReady once you deploy a CNI)")
	}

	deployKey := pulumi.String("").ToStringOutput()

	if c.ManifestSync.Enabled {
		// Flux (which needs the sync) comes with the other manifests, after the gate.
		fluxed := pulumi.StringMap{}
		if c.Flux != nil {
			if fluxed, deployKey, err = fluxManifests(s, pass, b.self); err != nil {
				return nil, err
			}
		}

		if err := b.syncManifests(health, helm, pass, fluxed); err != nil {
			return nil, err
		}
	}

	return &Operated{
		Kubeconfig:    pulumi.ToSecret(health.Kubeconfig).(pulumi.StringOutput),
		Talosconfig:   pulumi.ToSecret(health.Talosconfig).(pulumi.StringOutput),
		FluxDeployKey: deployKey,
	}, nil
}

// syncManifests registers the manifest sync after the health gate: the same manifests as the
// control planes' inlineManifests (Helm releases, then the inline manifests) and extraManifests,
// and more (Flux's, which only the sync applies).
func (b operation) syncManifests(health *lifecycle.CredentialsOutputs, helm []talosconfig.Manifest, pass PassThrough,
	more pulumi.StringMap,
) error {
	c := b.s.Cluster

	manifests := pulumi.StringMap{}
	for _, m := range helm {
		manifests[m.Name] = pulumi.String(m.Contents)
	}

	for i, m := range c.InlineManifests {
		manifests[m.Name] = pass.ManifestContents[i]
	}

	for _, m := range pass.Generated {
		manifests[m.Name] = m.Contents
	}

	for name, m := range more {
		manifests[name] = m
	}

	extra := pulumi.StringArray{}
	for _, u := range c.ExtraManifests {
		extra = append(extra, pulumi.String(u))
	}

	in, a := lifecycle.ManifestSyncKind.Inputs()
	lifecycle.Set(in, &a.Kubeconfig, health.Kubeconfig)
	lifecycle.Set(in, &a.Manifests, manifests)
	lifecycle.Set(in, &a.ExtraManifests, extra)
	lifecycle.Set(in, &a.Namespaces, pulumi.ToStringMap(c.ExtraManifestNamespaces))
	lifecycle.Set(in, &a.PruneCrdsAndNamespaces, pulumi.Bool(c.ManifestSync.PruneCrdsAndNamespaces))
	lifecycle.Set(in, &a.Force, pulumi.Bool(c.ManifestSync.Force))

	// Flux's GitRepository is ready only once the git host accepts the deploy key, which the
	// user adds after this `up` (its public half is an output of it).
	if _, ok := more[fluxSyncManifest]; ok {
		lifecycle.Set(in, &a.NoWait, pulumi.ToStringArray([]string{fluxSyncManifest}))
	}
	lifecycle.Set(in, &a.Timeout, pulumi.String(c.ManifestSync.Timeout.String()))

	if _, err := lifecycle.ManifestSyncKind.Register(b.s.Ctx, b.s.child("manifests"), in, b.s.parent(), b.self, pulumi.DependsOn([]pulumi.Resource{health})); err != nil {
		return errorf("registering the manifest sync: %w", err)
	}

	return nil
}

// retires registers one NodeRetire per node: replaced with the node's VM and deleted before it,
// so a node kept under its name on a new VM leaves the cluster first. The membership depends on
// them, so on a teardown its delete (which marks the teardown) comes first and theirs do nothing.
func (b operation) retires() ([]pulumi.Resource, error) {
	c := b.s.Cluster
	out := make([]pulumi.Resource, 0, len(c.Nodes))

	for _, n := range c.Nodes {
		in, a := lifecycle.NodeRetireKind.Inputs()
		setAccess(in, &a.ClusterAccess, b.r)
		setNodeRef(in, &a.NodeRef, n, b.m)
		lifecycle.Set(in, &a.DrainTimeout, pulumi.String(c.Upgrade.DrainTimeout.String()))
		lifecycle.Set(in, &a.Timeout, pulumi.String(c.Upgrade.Timeout.String()))

		res, err := lifecycle.NodeRetireKind.Register(b.s.Ctx, b.s.child(n.Name+"-retire"), in, b.s.parent(), b.self, pulumi.DependsOn(append([]pulumi.Resource{b.r.Applies[n.Name]}, b.r.Ready...)),
			pulumi.ReplaceWith([]pulumi.Resource{b.m.VMs[n.Name]}),
		)
		if err != nil {
			return nil, errorf("registering the retirement of node %s: %w", n.Name, err)
		}

		out = append(out, res)
	}

	return out, nil
}

// setAccess sets how a lifecycle resource reaches the cluster: the admin credentials.
func setAccess[A any](in *lifecycle.Inputs[A], a *lifecycle.ClusterAccess, r *Running) {
	lifecycle.Set(in, &a.Talosconfig, r.Talosconfig)
	lifecycle.Set(in, &a.Kubeconfig, r.Kubeconfig)
}

// setTalosCA sets the Talos API CA a lifecycle resource issues its own client certificates from
// (the key as a secret).
func setTalosCA[A any](in *lifecycle.Inputs[A], a *lifecycle.TalosCA, secrets *Secrets) {
	lifecycle.Set(in, &a.OsCaCertificate, secrets.OSCA.Cert)
	lifecycle.Set(in, &a.OsCaKey, secrets.OSCA.Key)
}

// setNodeRef sets how a per-node lifecycle resource finds its node.
func setNodeRef[A any](in *lifecycle.Inputs[A], a *lifecycle.NodeRef, n spec.Node, m *Machines) {
	lifecycle.Set(in, &a.Node, pulumi.String(n.Name))
	lifecycle.Set(in, &a.Address, m.Addresses[n.Name])
	lifecycle.Set(in, &a.ControlPlane, pulumi.Bool(n.Role == spec.RoleControlPlane))
}

// reconfigure registers, after the OS upgrades, the Kubernetes upgrade and then one NodeConfig
// per node, chained like the upgrades (control planes one at a time, workers upgrade.maxParallel
// at a time): a kubernetesVersion change moves component by component as upgrade-k8s does, and
// any other configuration change reaches one node at a time. It returns the NodeConfigs and the Kubernetes upgrade.
func (b operation) reconfigure(workers, cps pulumi.StringMap, order []spec.Node, upgrades []pulumi.Resource) ([]pulumi.Resource, error) {
	c := b.s.Cluster
	r := b.r

	in, a := lifecycle.KubernetesUpgradeKind.Inputs()
	setAccess(in, &a.ClusterAccess, r)
	lifecycle.Set(in, &a.ControlPlanes, cps)
	lifecycle.Set(in, &a.Workers, workers)
	lifecycle.Set(in, &a.KubernetesVersion, pulumi.String(c.KubernetesVersion))
	lifecycle.Set(in, &a.Timeout, pulumi.String(c.Upgrade.Timeout.String()))
	lifecycle.Set(in, &a.CheckReady, pulumi.Bool(c.Health.RequireNodesReady))

	k8s, err := lifecycle.KubernetesUpgradeKind.Register(b.s.Ctx, b.s.child("kubernetes"), in, b.s.parent(), b.self, pulumi.DependsOn(append(slices.Clone(upgrades), r.Ready...)))
	if err != nil {
		return nil, errorf("registering the Kubernetes upgrade: %w", err)
	}

	configs, err := b.rollout(order, false, func(n spec.Node, after []pulumi.Resource) (pulumi.Resource, error) {
		deps := append([]pulumi.Resource{r.Applies[n.Name]}, after...)
		if !b.fresh {
			deps = append(deps, k8s)
		}

		in, a := lifecycle.NodeConfigKind.Inputs()
		setAccess(in, &a.ClusterAccess, r)
		setNodeRef(in, &a.NodeRef, n, b.m)
		lifecycle.Set(in, &a.ControlPlanes, cps)
		lifecycle.Set(in, &a.Configuration, pulumi.ToSecret(r.ConfigOf[n.Name]).(pulumi.StringOutput))
		lifecycle.Set(in, &a.RedactedConfiguration, redactedOf(r.ConfigOf[n.Name]))

		if b.m.Adopted(n.Name) {
			lifecycle.Set(in, &a.Adopted, pulumi.Bool(true))
		}

		lifecycle.Set(in, &a.CheckReady, pulumi.Bool(c.Health.RequireNodesReady))
		lifecycle.Set(in, &a.Timeout, pulumi.String(c.Upgrade.Timeout.String()))

		// A new VM is configured by its ConfigurationApply: the record starts again.
		res, err := lifecycle.NodeConfigKind.Register(b.s.Ctx, b.s.child(n.Name+"-node-config"), in,
			append([]pulumi.ResourceOption{b.s.parent(), b.self, pulumi.DependsOn(deps)}, b.m.Instance(n.Name)...)...)
		if err != nil {
			return nil, errorf("registering the configuration of running node %s: %w", n.Name, err)
		}

		return res, nil
	})
	if err != nil {
		return nil, err
	}

	// For a new cluster the configurations do not wait for the Kubernetes record: what waits for
	// them (the membership, then the health gate) waits for it too.
	return append(configs, k8s), nil
}

// rollout registers one step per node in rollout order through register, which gets the steps
// the node's must wait for: control planes one at a time in the order given (leader last, see
// ControlPlaneOrder), then workers upgrade.maxParallel at a time, each after the last control
// plane. It returns the steps.
//
// A new cluster (no VM of it in Proxmox) has nothing running that the order protects, and its
// steps' creates only record what each node runs: they go at once, except that with cpsInTurn
// the control planes still go one at a time (a NodeUpgrade's create upgrades a node that does not
// run the target, which a node installed from the target image does; should one not, etcd still
// loses one member at a time). Chaining them cost a Pulumi step per node on every create.
func (b operation) rollout(cps []spec.Node, cpsInTurn bool, register func(n spec.Node, after []pulumi.Resource) (pulumi.Resource, error)) ([]pulumi.Resource, error) {
	c := b.s.Cluster
	fresh := b.fresh
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

// redactedOf is a configuration with every secret value replaced by its fingerprint: not secret,
// so a preview shows its line diff.
func redactedOf(cfg pulumi.StringOutput) pulumi.StringOutput {
	if !lifecycle.ConfigDiffs() {
		return pulumi.String("").ToStringOutput()
	}

	return pulumi.Unsecret(cfg.ApplyT(redact.Config)).(pulumi.StringOutput)
}
