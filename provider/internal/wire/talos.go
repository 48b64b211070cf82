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

// Talos registers the Talos side: one configuration apply per node (after its VM), the
// bootstrap of the first control plane, the kubeconfig and the client credentials.
func Talos(s Scope, secrets *Secrets, m *Machines, configs Configs, self Lifecycle) (*Running, error) {
	c := s.Cluster
	cc := secrets.Resource.ClientConfiguration
	endpointURL := m.Addresses.EndpointURL(c)

	r := &Running{Applies: map[string]pulumi.Resource{}, ConfigOf: map[string]pulumi.StringOutput{}, Endpoint: endpointURL}

	for _, n := range c.Nodes {
		cfg := configs.Of(n, m.Addresses)
		ip := m.Addresses[n.Name]

		apply, err := machine.NewConfigurationApply(s.Ctx, s.child(n.Name+"-config"), &machine.ConfigurationApplyArgs{
			ClientConfiguration:       cc,
			MachineConfigurationInput: cfg,
			Node:                      ip,
			Endpoint:                  ip,
		}, s.parent(),
			pulumi.DependsOn([]pulumi.Resource{m.VMs[n.Name]}),
			// A new VM boots into maintenance mode and needs its configuration again; the
			// upstream resource never notices a new VM by itself.
			pulumi.ReplaceWith([]pulumi.Resource{m.VMs[n.Name]}),
			pulumi.AdditionalSecretOutputs([]string{"machineConfiguration", "machineConfigurationInput", "clientConfiguration"}),
			// It configures the new node only: later changes reach the running node through its
			// NodeConfig, one node at a time after the upgrades (Operate), never all at once.
			pulumi.IgnoreChanges([]string{"machineConfigurationInput"}),
		)
		if err != nil {
			return nil, errorf("registering the configuration of node %s: %w", n.Name, err)
		}

		r.Applies[n.Name] = apply
		r.Configs = append(r.Configs, cfg)
		r.ConfigOf[n.Name] = cfg
	}

	first := m.Addresses[c.BootstrapNode().Name]

	bootstrapOpts := []pulumi.ResourceOption{
		s.parent(),
		// The bootstrap node alone must be configured, as Talos documents: the other control
		// planes join its etcd whenever they are configured (waiting for all of them held the
		// cluster's start until the last VM, created in whatever order the engine takes them).
		pulumi.DependsOn([]pulumi.Resource{r.Applies[c.BootstrapNode().Name]}),
		// Bootstrapping a running cluster again fails: once done, never again, whatever
		// happens to the node list.
		pulumi.IgnoreChanges([]string{"node", "endpoint", "clientConfiguration"}),
		pulumi.AdditionalSecretOutputs([]string{"clientConfiguration"}),
	}
	if cps := c.ControlPlanes(); len(cps) == 1 {
		// With a single control plane, a new VM for it starts an empty etcd: the cluster
		// must be bootstrapped again. (With more, the new VM joins the running etcd.)
		bootstrapOpts = append(bootstrapOpts, pulumi.ReplaceWith([]pulumi.Resource{m.VMs[cps[0].Name]}))
	}

	bootstrap, err := machine.NewBootstrap(s.Ctx, s.child("bootstrap"), &machine.BootstrapArgs{
		ClientConfiguration: cc,
		Node:                first,
		Endpoint:            first,
	}, bootstrapOpts...)
	if err != nil {
		return nil, errorf("registering the bootstrap: %w", err)
	}

	kubeconfig, err := cluster.NewKubeconfig(s.Ctx, s.child("kubeconfig"), &cluster.KubeconfigArgs{
		ClientConfiguration: cluster.KubeconfigClientConfigurationArgs{
			CaCertificate:     cc.CaCertificate(),
			ClientCertificate: cc.ClientCertificate(),
			ClientKey:         cc.ClientKey(),
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

	r.Ready = []pulumi.Resource{bootstrap, kubeconfig}

	creds, err := clientCredentials(s, secrets, m.Addresses, endpointURL, self)
	if err != nil {
		return nil, err
	}

	r.Kubeconfig = pulumi.ToSecret(creds.Kubeconfig).(pulumi.StringOutput)
	r.Talosconfig = pulumi.ToSecret(creds.Talosconfig).(pulumi.StringOutput)

	return r, nil
}

// clientCredentials registers the admin talosconfig and kubeconfig, issued from the cluster's CAs
// and renewed within credentials.renewBefore of their expiry (lifecycle.ClientCredentials).
func clientCredentials(s Scope, secrets *Secrets, addrs Addresses, endpointURL pulumi.StringOutput, self Lifecycle) (*lifecycle.CredentialsOutputs, error) {
	c := s.Cluster
	certs := secrets.Resource.MachineSecrets.Certs()

	in, a := lifecycle.ClientCredentialsKind.Inputs()
	lifecycle.Set(in, &a.ClusterName, pulumi.String(c.Name))
	lifecycle.Set(in, &a.Endpoint, endpointURL)
	lifecycle.Set(in, &a.OsCaCertificate, certs.Os().Cert())
	lifecycle.Set(in, &a.OsCaKey, pulumi.ToSecret(certs.Os().Key()).(pulumi.StringOutput))
	lifecycle.Set(in, &a.KubernetesCaCertificate, certs.K8s().Cert())
	lifecycle.Set(in, &a.KubernetesCaKey, pulumi.ToSecret(certs.K8s().Key()).(pulumi.StringOutput))
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
