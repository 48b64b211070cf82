package provider

import (
	"fmt"
	"slices"
	"strings"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// machineSecrets registers the cluster's PKI (the talos provider generates and keeps it). The
// configurations applied are made from it; a running cluster's are checked with it before any
// new VM (configCheck).
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
func (b *builder) machineConfiguration(n spec.Node, src configSource, nodePatch pulumi.StringOutput, endpointURL pulumi.StringOutput,
	manifests pulumi.StringOutput,
) pulumi.StringOutput {
	c := b.cluster

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
	cfg := pulumi.All(src.secrets, src.contract, endpointURL, all).ApplyT(func(v []any) (string, error) {
		return machineconfig.Generate(machineconfig.Request{
			ClusterName:       c.Name,
			Endpoint:          v[2].(string),
			KubernetesVersion: c.KubernetesVersion,
			Contract:          v[1].(string),
			ControlPlane:      n.Role == spec.RoleControlPlane,
			Secrets:           v[0].(machineconfig.Secrets),
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

// configSource is what a node's configuration is generated from: secrets (resolving to
// machineconfig.Secrets) and the configuration contract.
type configSource struct {
	secrets  pulumi.AnyOutput
	contract pulumi.StringOutput
}

// clusterSecrets is the cluster's own source: the talos provider's secrets and the contract they
// keep.
func (b *builder) clusterSecrets() configSource {
	return configSource{
		secrets: b.secrets.MachineSecrets.ApplyT(func(m machine.MachineSecrets) machineconfig.Secrets {
			return secretsOf(m)
		}).(pulumi.AnyOutput),
		contract: b.secrets.TalosVersion,
	}
}

// placeholderSecrets is the source of a cluster whose secrets do not exist yet: placeholder
// secrets (machineconfig.Placeholder) and the contract the secrets will be created with.
func (b *builder) placeholderSecrets() configSource {
	contract := b.cluster.ConfigContract

	return configSource{
		secrets: pulumi.All().ApplyT(func([]any) (machineconfig.Secrets, error) {
			return machineconfig.Placeholder(contract)
		}).(pulumi.AnyOutput),
		contract: pulumi.String(contract).ToStringOutput(),
	}
}

// isNew reports whether Proxmox holds no VM of this cluster (by its tags), so its secrets are
// created in this update with the contract asked for. Unknown (Proxmox not asked, or a provider
// that answers nothing, e.g. with unknown configuration at preview) is not new.
//
// Proxmox, not the state, decides: secrets left by a first `up` that failed before any VM keep
// the contract they were created with, and if talosVersion or configContract changed since, a
// patch the placeholder check accepts may still be refused at the apply, after the VMs exist.
func (b *builder) isNew() bool {
	if b.inventory == nil || len(b.inventory.Nodes) == 0 {
		return false
	}

	return !slices.ContainsFunc(b.inventory.VMs, func(v vm.GetVirtualMachinesVm) bool { return isOwnVM(b.cluster.Name, v.Tags) })
}

// configCheck generates and validates every node's configuration with placeholder addresses
// where they come from the VMs (DHCP): a patch Talos rejects — a JSON patch on a multi-document
// configuration, a hostname beside the HostnameConfig document, a field Talos does not know —
// then fails the `up` (and the preview) before any VM is created. The VMs depend on what it
// resolves to.
//
// A new cluster is checked with placeholder secrets and the contract its secrets will keep, at
// once: its VMs do not wait for the talos provider to generate the secrets (an RSA key, up to
// seconds), which are needed only when the configurations are applied. A cluster that has VMs
// is checked with its own secrets and contract (the contract may be older than the one asked for
// now), which exist already. With static addresses the configurations made from the cluster's
// secrets are the ones applied (b.configs), so each is generated once.
func (b *builder) configCheck() pulumi.ResourceArrayOutput {
	c := b.cluster
	own := b.clusterSecrets()
	b.manifests = b.manifestsPatch(own.contract)
	b.configs = map[string]pulumi.StringOutput{}

	placeholder := b.isNew()

	check, checkManifests := own, b.manifests
	if placeholder {
		check = b.placeholderSecrets()
		checkManifests = b.manifestsPatch(check.contract)
	}

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

	var checked []any

	for _, n := range c.Nodes {
		nodePatch := func(src configSource) pulumi.StringOutput {
			return src.contract.ApplyT(func(contract string) (string, error) {
				return talosconfig.NodePatch(c, n, talosconfig.Addresses{NodeIP: ip[n.Name], ControlPlaneIPs: cpIPs, Endpoint: endpoint}, contract)
			}).(pulumi.StringOutput)
		}

		if !c.Network.DHCP {
			b.configs[n.Name] = b.machineConfiguration(n, own, nodePatch(own), endpointURL, b.manifests)
		}

		if cfg, ok := b.configs[n.Name]; ok && !placeholder {
			checked = append(checked, cfg)
		} else {
			checked = append(checked, b.machineConfiguration(n, check, nodePatch(check), endpointURL, checkManifests))
		}
	}

	var deps []pulumi.Resource
	if !placeholder {
		deps = []pulumi.Resource{b.secrets}
	}

	return pulumi.All(checked...).ApplyT(func([]any) []pulumi.Resource {
		return deps
	}).(pulumi.ResourceArrayOutput)
}
