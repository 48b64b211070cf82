package provider

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// machineSecrets registers the cluster's PKI (the talos provider generates and keeps it), before
// any VM: the configurations are checked with it first (configCheck).
func (b *builder) machineSecrets() error {
	c := b.cluster

	secrets, err := machine.NewSecrets(b.ctx, b.child("secrets"), &machine.SecretsArgs{
		TalosVersion: pulumi.String(c.ConfigContract),
	}, b.parent(),
		pulumi.AdditionalSecretOutputs([]string{"machineSecrets", "clientConfiguration"}),
		// The secrets are the cluster's PKI: regenerating them (the upstream resource would on
		// a talosVersion change) breaks every node. They are created once and kept.
		pulumi.IgnoreChanges([]string{"talosVersion"}),
	)
	if err != nil {
		return errorf("registering the machine secrets: %w", err)
	}

	b.secrets = secrets

	return nil
}

// machineConfiguration generates a node's configuration: Talos' own generation, then the
// component's patches, then the user's (cluster-wide, role, node). It is a secret: it holds
// the cluster's keys.
func (b *builder) machineConfiguration(n spec.Node, nodePatch pulumi.StringOutput, endpointURL pulumi.StringOutput,
	manifests pulumi.StringOutput,
) pulumi.StringOutput {
	c := b.cluster
	secrets := b.secrets

	type source struct {
		from    string
		patches pulumi.StringArrayInput
	}

	sources := []source{{"the component's patch for node " + n.Name, pulumi.StringArray{nodePatch}}}
	if n.Role == spec.RoleControlPlane {
		sources = append(sources, source{"the component's manifests patch", pulumi.StringArray{manifests}},
			source{"configPatches", b.pass.ConfigPatches}, source{"controlPlaneConfigPatches", b.pass.ControlPlaneConfigPatches})
	} else {
		sources = append(sources, source{"configPatches", b.pass.ConfigPatches}, source{"workerConfigPatches", b.pass.WorkerConfigPatches})
	}

	sources = append(sources, source{"nodes." + n.Name + ".configPatches", b.pass.NodeConfigPatches[n.Name]})

	// Each patch with where it comes from, so an error names it; an empty manifests patch (no
	// inline or extra manifests) is dropped.
	all := pulumi.Any([]machineconfig.Patch{})
	for _, src := range sources {
		if src.patches == nil {
			continue
		}

		all = pulumi.All(all, src.patches).ApplyT(func(v []any) []machineconfig.Patch {
			out := slices.Clone(v[0].([]machineconfig.Patch))
			for i, text := range v[1].([]string) {
				from := src.from
				if !strings.HasPrefix(from, "the component") {
					from = fmt.Sprintf("%s[%d]", from, i)
				}

				if text != "" {
					out = append(out, machineconfig.Patch{From: from, Text: text})
				}
			}

			return out
		}).(pulumi.AnyOutput)
	}

	// In-process, with the machinery this plugin is built with (DESIGN §4): the talos provider's
	// getConfiguration cannot write the newer contracts. The contract is the one the cluster was
	// created with (the secrets keep it: they ignore later talosVersion changes), so an OS
	// upgrade never switches the configuration's format (siderolabs/terraform-provider-talos#401).
	cfg := pulumi.All(secrets.MachineSecrets, secrets.TalosVersion, endpointURL, all).ApplyT(func(v []any) (string, error) {
		return machineconfig.Generate(machineconfig.Request{
			ClusterName:       c.Name,
			Endpoint:          v[2].(string),
			KubernetesVersion: c.KubernetesVersion,
			Contract:          v[1].(string),
			ControlPlane:      n.Role == spec.RoleControlPlane,
			Secrets:           secretsOf(v[0].(machine.MachineSecrets)),
			Patches:           v[3].([]machineconfig.Patch),
		})
	}).(pulumi.StringOutput)

	return pulumi.ToSecret(cfg).(pulumi.StringOutput)
}

// secretsOf is the talos provider's machine secrets in the generator's form.
func secretsOf(m machine.MachineSecrets) machineconfig.Secrets {
	ck := func(c machine.Certificate) machineconfig.CertAndKey {
		return machineconfig.CertAndKey{Cert: c.Cert, Key: c.Key}
	}

	aescbc := ""
	if m.Secrets.AescbcEncryptionSecret != nil {
		aescbc = *m.Secrets.AescbcEncryptionSecret
	}

	return machineconfig.Secrets{
		ClusterID: m.Cluster.Id, ClusterSecret: m.Cluster.Secret,
		BootstrapToken: m.Secrets.BootstrapToken, SecretboxEncryptionSecret: m.Secrets.SecretboxEncryptionSecret,
		AESCBCEncryptionSecret: aescbc, TrustdToken: m.Trustdinfo.Token,
		Certs: map[string]machineconfig.CertAndKey{
			"etcd": ck(m.Certs.Etcd), "k8s": ck(m.Certs.K8s), "k8sAggregator": ck(m.Certs.K8sAggregator), "os": ck(m.Certs.Os),
		},
		ServiceAccountKey: m.Certs.K8sServiceaccount.Key,
	}
}

// configCheck generates and validates every node's configuration with the cluster's secrets and
// contract as soon as the secrets exist, with placeholder addresses where they come from the
// VMs (DHCP): a patch Talos rejects — a JSON patch on a multi-document configuration, a
// hostname beside the HostnameConfig document, a field Talos does not know — then fails the
// `up` before any VM is created (and at preview, once the secrets exist). It resolves to the
// secrets resource, which the VMs then depend on. With static addresses the checked
// configurations are the ones applied (b.configs), so each is generated once.
func (b *builder) configCheck() pulumi.ResourceArrayOutput {
	c := b.cluster
	b.manifests = b.manifestsPatch()
	manifests := b.manifests
	b.configs = map[string]pulumi.StringOutput{}

	var cpIPs []string

	ip := map[string]string{}
	for i, n := range c.Nodes {
		ip[n.Name] = n.IP
		if c.Network.DHCP {
			ip[n.Name] = fmt.Sprintf("192.0.2.%d", i+1) // TEST-NET-1: never a real node
		}

		if n.Role == spec.RoleControlPlane {
			cpIPs = append(cpIPs, ip[n.Name])
		}
	}

	// As endpointHost: the endpoint, else the bootstrap node's address.
	endpoint := c.Endpoint
	if endpoint == "" {
		endpoint = ip[c.BootstrapNode().Name]
	}

	endpointURL := pulumi.String(talosconfig.ClusterEndpoint(endpoint)).ToStringOutput()

	var configs []any

	for _, n := range c.Nodes {
		nodePatch := b.secrets.TalosVersion.ApplyT(func(contract string) (string, error) {
			return talosconfig.NodePatch(c, n, talosconfig.Addresses{NodeIP: ip[n.Name], ControlPlaneIPs: cpIPs, Endpoint: endpoint}, contract)
		}).(pulumi.StringOutput)

		cfg := b.machineConfiguration(n, nodePatch, endpointURL, manifests)
		if !c.Network.DHCP {
			b.configs[n.Name] = cfg
		}

		configs = append(configs, cfg)
	}

	secrets := b.secrets

	return pulumi.All(configs...).ApplyT(func([]any) []pulumi.Resource {
		return []pulumi.Resource{secrets}
	}).(pulumi.ResourceArrayOutput)
}
