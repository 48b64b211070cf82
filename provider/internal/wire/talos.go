package wire

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/cluster"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/lifecycle"
)

// Running is what Talos returns: the cluster as the day-2 resources find it.
type Running struct {
	// Applies are the nodes' first configuration applies, by node name.
	Applies map[string]pulumi.Resource
	// Configs are the nodes' configurations, in node order, and by node name.
	Configs  pulumi.StringArray
	ConfigOf map[string]pulumi.StringOutput
	// Ready is what a running cluster has once it exists: the bootstrap and the kubeconfig.
	Ready []pulumi.Resource
	// Kubeconfig and Talosconfig are the admin credentials (secrets).
	Kubeconfig  pulumi.StringOutput
	Talosconfig pulumi.StringOutput
	// Endpoint is the Kubernetes API URL.
	Endpoint pulumi.StringOutput
}

// Talos registers the Talos side: one configuration apply per node (after its VM), the client
// credentials, the bootstrap of etcd on the first control plane (from a snapshot when this `up`
// leaves no control plane in place, or recovery asks for one; see bootstrap) and the kubeconfig.
func Talos(s Scope, secrets *Secrets, m *Machines, configs Configs, backup *Backup, pass PassThrough, self Lifecycle) (*Running, error) {
	c := s.Cluster
	cc := secrets.Client
	endpointURL := m.Addresses.EndpointURL(c)

	r := &Running{Applies: map[string]pulumi.Resource{}, ConfigOf: map[string]pulumi.StringOutput{}, Endpoint: endpointURL}

	for _, n := range c.Nodes {
		cfg := configs.Of(n, m.Addresses)
		ip := m.Addresses[n.Name]

		r.Configs = append(r.Configs, cfg)
		r.ConfigOf[n.Name] = cfg

		// An adopted node runs the configuration it was given before the component knew it: its
		// NodeConfig applies the generated one only where it differs (Operate).
		if m.Adopted(n.Name) {
			r.Applies[n.Name] = m.VMs[n.Name]
			continue
		}

		apply, err := machine.NewConfigurationApply(s.Ctx, s.child(n.Name+"-config"), &machine.ConfigurationApplyArgs{
			ClientConfiguration: machine.ClientConfigurationArgs{
				CaCertificate: cc.CA, ClientCertificate: cc.Cert, ClientKey: cc.Key,
			},
			MachineConfigurationInput: cfg,
			Node:                      ip,
			Endpoint:                  ip,
		}, append([]pulumi.ResourceOption{
			s.parent(),
			pulumi.DependsOn([]pulumi.Resource{m.VMs[n.Name]}),
			pulumi.AdditionalSecretOutputs([]string{"machineConfiguration", "machineConfigurationInput", "clientConfiguration"}),
			// It configures the new node only: later changes reach the running node through its
			// NodeConfig, one node at a time after the upgrades (Operate), never all at once.
			pulumi.IgnoreChanges([]string{"machineConfigurationInput"}),
		},
			// A new VM boots into maintenance mode and needs its configuration again; the
			// upstream resource never notices a new VM by itself.
			m.Instance(n.Name)...)...,
		)
		if err != nil {
			return nil, errorf("registering the configuration of node %s: %w", n.Name, err)
		}

		r.Applies[n.Name] = apply
	}

	first := m.Addresses[c.BootstrapNode().Name]

	creds, err := clientCredentials(s, secrets, m.Addresses, endpointURL, self)
	if err != nil {
		return nil, err
	}

	r.Kubeconfig = pulumi.ToSecret(creds.Kubeconfig).(pulumi.StringOutput)
	r.Talosconfig = pulumi.ToSecret(creds.Talosconfig).(pulumi.StringOutput)

	bootstrap, err := bootstrapEtcd(s, m, r, backup, pass, self)
	if err != nil {
		return nil, err
	}

	kubeconfig, err := cluster.NewKubeconfig(s.Ctx, s.child("kubeconfig"), &cluster.KubeconfigArgs{
		ClientConfiguration: cluster.KubeconfigClientConfigurationArgs{
			CaCertificate:     cc.CA,
			ClientCertificate: cc.Cert,
			ClientKey:         cc.Key,
		},
		Node:     first,
		Endpoint: first,
	}, s.parent(),
		pulumi.DependsOn([]pulumi.Resource{bootstrap}),
		pulumi.AdditionalSecretOutputs([]string{"kubeconfigRaw", "kubernetesClientConfiguration", "clientConfiguration"}),
	)
	if err != nil {
		return nil, errorf("registering the kubeconfig: %w", err)
	}

	r.Ready = append([]pulumi.Resource{bootstrap, kubeconfig}, backup.Before...)

	return r, nil
}

// bootstrapEtcd registers the bootstrap of etcd (`<name>-bootstrap`, an EtcdBootstrap) on the first
// control plane by name, after that node's configuration apply alone (the other control planes
// join its etcd whenever they are configured, as Talos documents; waiting for all of them held
// the cluster's start until the last VM, created in whatever order the engine takes them). It is
// the control plane VMs': replaced with any of them and when one of them is a new instance (see
// Machines.Instance; EtcdBootstrap's Diff), and its create does nothing when a control plane runs
// etcd, so it bootstraps only when none does — a new cluster, the only
// control plane (or every one) replaced, every one lost. Then it restores, in this order: the
// snapshot this `up` took first when the `up` leaves no control plane in place (etcdBackup), else
// recovery.fromSnapshot; else it starts an empty etcd.
func bootstrapEtcd(s Scope, m *Machines, r *Running, backup *Backup, pass PassThrough, self Lifecycle) (pulumi.Resource, error) {
	c := s.Cluster
	node := c.BootstrapNode()

	cps := pulumi.StringMap{}
	for _, n := range c.ControlPlanes() {
		cps[n.Name] = m.Addresses[n.Name]
	}

	in, a := lifecycle.EtcdBootstrapKind.Inputs()
	lifecycle.Set(in, &a.Talosconfig, r.Talosconfig)
	lifecycle.Set(in, &a.Node, pulumi.String(node.Name))
	lifecycle.Set(in, &a.Address, m.Addresses[node.Name])
	lifecycle.Set(in, &a.ControlPlanes, cps.ToStringMapOutput())
	lifecycle.Set(in, &a.Timeout, pulumi.String(c.Upgrade.Timeout.String()))

	switch {
	case backup.Restores && backup.Snapshot != nil:
		lifecycle.Set(in, &a.RecoverFrom, backup.Snapshot.Location)
	case c.Recovery != nil && c.Recovery.FromSnapshot != "":
		lifecycle.Set(in, &a.RecoverFrom, pulumi.String(c.Recovery.FromSnapshot).ToStringOutput())
	}

	if pass.AgeIdentity != nil {
		lifecycle.Set(in, &a.AgeIdentity, pulumi.ToSecret(pass.AgeIdentity.ToStringOutput()).(pulumi.StringOutput))
	}

	var names []string
	for _, n := range c.ControlPlanes() {
		names = append(names, n.Name)
	}

	lifecycle.Set(in, &a.Instances, pulumi.ToStringMap(m.Instances(names)).ToStringMapOutput())

	vms := make([]pulumi.Resource, 0, len(names))
	for _, n := range names {
		vms = append(vms, m.VMs[n])
	}

	opts := []pulumi.ResourceOption{
		s.parent(), self.option,
		pulumi.DependsOn(append([]pulumi.Resource{r.Applies[node.Name]}, backup.Before...)),
		pulumi.AdditionalSecretOutputs([]string{"talosconfig", "ageIdentity"}),
		pulumi.ReplaceWith(vms),
	}

	res, err := lifecycle.EtcdBootstrapKind.Register(s.Ctx, s.child("bootstrap"), in, opts...)
	if err != nil {
		return nil, errorf("registering the bootstrap: %w", err)
	}

	return res, nil
}

// clientCredentials registers the admin talosconfig and kubeconfig, issued from the cluster's CAs
// and renewed within credentials.renewBefore of their expiry (lifecycle.ClientCredentials).
func clientCredentials(s Scope, secrets *Secrets, addrs Addresses, endpointURL pulumi.StringOutput, self Lifecycle) (*lifecycle.CredentialsOutputs, error) {
	c := s.Cluster
	in, a := lifecycle.ClientCredentialsKind.Inputs()
	lifecycle.Set(in, &a.ClusterName, pulumi.String(c.Name))
	lifecycle.Set(in, &a.Endpoint, endpointURL)
	setTalosCA(in, &a.TalosCA, secrets)
	lifecycle.Set(in, &a.KubernetesCaCertificate, secrets.KubernetesCA.Cert)
	lifecycle.Set(in, &a.KubernetesCaKey, secrets.KubernetesCA.Key)
	lifecycle.Set(in, &a.TalosEndpoints, addrs.Of(c.ControlPlanes()))
	lifecycle.Set(in, &a.TalosNodes, addrs.Of(c.Nodes))
	lifecycle.Set(in, &a.Validity, pulumi.String(c.Credentials.Validity.String()))
	lifecycle.Set(in, &a.RenewBefore, pulumi.String(c.Credentials.RenewBefore.String()))

	r, err := lifecycle.ClientCredentialsKind.Register(s.Ctx, s.child("credentials"), in, s.parent(), self.option, pulumi.AdditionalSecretOutputs([]string{"talosconfig", "kubeconfig"}))
	if err != nil {
		return nil, errorf("registering the client credentials: %w", err)
	}

	return r, nil
}
