package provider

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/cluster"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// talos registers the Talos side: machine secrets, one configuration and apply per node, the
// bootstrap of the first control plane and the kubeconfig.
func (b *builder) talos() error {
	c := b.cluster

	secrets := b.secrets

	endpointURL := b.endpointHost().ApplyT(talosconfig.ClusterEndpoint).(pulumi.StringOutput)
	manifests := b.manifests

	applies := map[string]pulumi.Resource{}
	configs := pulumi.StringArray{}
	configOf := map[string]pulumi.StringOutput{}

	own := b.clusterSecrets()

	for _, n := range c.Nodes {
		cfg, checked := b.configs[n.Name]
		if !checked {
			cfg = b.machineConfiguration(n, own, b.nodePatch(n, own.contract), endpointURL, manifests)
		}
		ip := b.nodeIPs[n.Name]

		apply, err := machine.NewConfigurationApply(b.ctx, b.child(n.Name+"-config"), &machine.ConfigurationApplyArgs{
			ClientConfiguration:       secrets.ClientConfiguration,
			MachineConfigurationInput: cfg,
			Node:                      ip,
			Endpoint:                  ip,
		}, b.parent(),
			pulumi.DependsOn([]pulumi.Resource{b.vms[n.Name]}),
			// A new VM boots into maintenance mode and needs its configuration again; the
			// upstream resource never notices a new VM by itself.
			pulumi.ReplaceWith([]pulumi.Resource{b.vms[n.Name]}),
			pulumi.AdditionalSecretOutputs([]string{"machineConfiguration", "machineConfigurationInput", "clientConfiguration"}),
			// It configures the new node only: later changes reach the running node through its
			// NodeConfig, one node at a time after the upgrades (day2.go), never all at once.
			pulumi.IgnoreChanges([]string{"machineConfigurationInput"}),
		)
		if err != nil {
			return errorf("registering the configuration of node %s: %w", n.Name, err)
		}

		applies[n.Name] = apply
		configs = append(configs, cfg)
		configOf[n.Name] = cfg
	}

	first := b.nodeIPs[c.BootstrapNode().Name]

	bootstrapOpts := []pulumi.ResourceOption{
		b.parent(),
		// The bootstrap node alone must be configured, as Talos documents: the other control
		// planes join its etcd whenever they are configured (waiting for all of them held the
		// cluster's start until the last VM, created in whatever order the engine takes them).
		pulumi.DependsOn([]pulumi.Resource{applies[c.BootstrapNode().Name]}),
		// Bootstrapping a running cluster again fails: once done, never again, whatever
		// happens to the node list.
		pulumi.IgnoreChanges([]string{"node", "endpoint", "clientConfiguration"}),
		pulumi.AdditionalSecretOutputs([]string{"clientConfiguration"}),
	}
	if cps := c.ControlPlanes(); len(cps) == 1 {
		// With a single control plane, a new VM for it starts an empty etcd: the cluster
		// must be bootstrapped again. (With more, the new VM joins the running etcd.)
		bootstrapOpts = append(bootstrapOpts, pulumi.ReplaceWith([]pulumi.Resource{b.vms[cps[0].Name]}))
	}

	bootstrap, err := machine.NewBootstrap(b.ctx, b.child("bootstrap"), &machine.BootstrapArgs{
		ClientConfiguration: secrets.ClientConfiguration,
		Node:                first,
		Endpoint:            first,
	}, bootstrapOpts...)
	if err != nil {
		return errorf("registering the bootstrap: %w", err)
	}

	cc := secrets.ClientConfiguration
	kubeconfig, err := cluster.NewKubeconfig(b.ctx, b.child("kubeconfig"), &cluster.KubeconfigArgs{
		ClientConfiguration: cluster.KubeconfigClientConfigurationArgs{
			CaCertificate:     cc.CaCertificate(),
			ClientCertificate: cc.ClientCertificate(),
			ClientKey:         cc.ClientKey(),
		},
		Node:     first,
		Endpoint: first,
	}, b.parent(),
		pulumi.DependsOn([]pulumi.Resource{bootstrap}),
		pulumi.AdditionalSecretOutputs([]string{"kubeconfigRaw", "kubernetesClientConfiguration", "clientConfiguration"}),
	)
	if err != nil {
		return errorf("registering the kubeconfig: %w", err)
	}

	creds, err := b.clientCredentials(endpointURL)
	if err != nil {
		return err
	}

	b.comp.Endpoint = endpointURL
	b.comp.ClusterName = pulumi.String(c.Name).ToStringOutput()

	return b.operate(running{
		applies: applies, configs: configs, configOf: configOf, ready: []pulumi.Resource{bootstrap, kubeconfig},
		kubeconfig:  pulumi.ToSecret(creds.Kubeconfig).(pulumi.StringOutput),
		talosconfig: pulumi.ToSecret(creds.Talosconfig).(pulumi.StringOutput),
	})
}

// clientCredentialsResource is the Go view of lifecycle.ClientCredentials.
type clientCredentialsResource struct {
	pulumi.CustomResourceState

	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
	Kubeconfig  pulumi.StringOutput `pulumi:"kubeconfig"`
}

// clientCredentials registers the admin talosconfig and kubeconfig, issued from the cluster's CAs
// and renewed within credentials.renewBefore of their expiry (lifecycle.ClientCredentials).
func (b *builder) clientCredentials(endpointURL pulumi.StringOutput) (*clientCredentialsResource, error) {
	self, err := b.lifecycleProvider()
	if err != nil {
		return nil, err
	}

	c := b.cluster
	certs := b.secrets.MachineSecrets.Certs()

	var r clientCredentialsResource
	if err := b.ctx.RegisterResource(clientCredentialsToken, b.child("credentials"), pulumi.Map{
		"clusterName":             pulumi.String(c.Name),
		"endpoint":                endpointURL,
		"osCaCertificate":         certs.Os().Cert(),
		"osCaKey":                 pulumi.ToSecret(certs.Os().Key()),
		"kubernetesCaCertificate": certs.K8s().Cert(),
		"kubernetesCaKey":         pulumi.ToSecret(certs.K8s().Key()),
		"talosEndpoints":          b.ips(c.ControlPlanes()),
		"talosNodes":              b.ips(c.Nodes),
		"validity":                pulumi.String(c.Credentials.Validity.String()),
		"renewBefore":             pulumi.String(c.Credentials.RenewBefore.String()),
	}, &r, b.parent(), self, pulumi.AdditionalSecretOutputs([]string{"talosconfig", "kubeconfig"})); err != nil {
		return nil, errorf("registering the client credentials: %w", err)
	}

	return &r, nil
}

// manifestsPatch is the control plane patch with the rendered Helm releases, then the inline
// manifests, and the extra manifests, identical on every control plane. Manifest contents may be outputs or secrets.
func (b *builder) manifestsPatch(contract pulumi.StringOutput) pulumi.StringOutput {
	contents := []any{contract}
	for _, c := range b.pass.ManifestContents {
		contents = append(contents, c)
	}

	names := make([]string, len(b.cluster.InlineManifests))
	for i, m := range b.cluster.InlineManifests {
		names[i] = m.Name
	}

	extra := b.cluster.TalosExtraManifests()

	helm := b.helm

	// The first value is the cluster's configuration contract, the rest the manifests' contents.
	return pulumi.All(contents...).ApplyT(func(v []any) (string, error) {
		ms := append([]talosconfig.Manifest{}, helm...)
		for i, c := range v[1:] {
			ms = append(ms, talosconfig.Manifest{Name: names[i], Contents: c.(string)})
		}

		return talosconfig.ManifestsPatch(ms, extra, v[0].(string))
	}).(pulumi.StringOutput)
}
