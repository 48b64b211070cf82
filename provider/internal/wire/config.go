package wire

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// PassThrough carries the inputs that are outputs by design from the component's arguments to
// its children: config patches and inline manifest contents may be secrets, or unknown until
// other resources exist, so they flow into the child resources as Pulumi inputs. After
// validation the stages read only the spec and this.
type PassThrough struct {
	ConfigPatches             pulumi.StringArrayInput
	ControlPlaneConfigPatches pulumi.StringArrayInput
	WorkerConfigPatches       pulumi.StringArrayInput
	// NodeConfigPatches are each node's own patches, by node name.
	NodeConfigPatches map[string]pulumi.StringArrayInput
	// ManifestContents are the contents of inlineManifests, in order.
	ManifestContents []pulumi.StringInput
	// Generated are the manifests the component makes from its own children's outputs (the
	// Secrets of the Proxmox tokens, ProxmoxTokens), applied after the inline manifests.
	Generated []GeneratedManifest
	// AgeIdentity is recovery.ageIdentity (a secret; nil when unset).
	AgeIdentity pulumi.StringInput
	// SecretsBundle is secrets.bundle (a secret; nil when unset).
	SecretsBundle pulumi.StringInput
	// FluxSSHKey is flux.sshKey (a secret; nil when unset).
	FluxSSHKey pulumi.StringInput
}

// Configs is what CheckConfigs returns: what the VMs wait for, and how every node's
// configuration is made.
type Configs struct {
	// Checked resolves once every node's configuration was generated and validated; the VMs
	// depend on what it resolves to.
	Checked pulumi.ResourceArrayOutput
	// Manifests is the control planes' manifests patch, in the cluster's contract.
	Manifests pulumi.StringOutput

	gen     generator
	checked map[string]pulumi.StringOutput
}

// generator makes nodes' configurations from the cluster, its pass-through inputs and rendered
// Helm releases.
type generator struct {
	cluster *spec.Cluster
	pass    PassThrough
	helm    []talosconfig.Manifest
	own     configSource
}

// CheckConfigs generates and validates every node's configuration with placeholder addresses
// where they come from the VMs (DHCP): a patch Talos rejects — a JSON patch on a multi-document
// configuration, a hostname beside the HostnameConfig document, a field Talos does not know —
// then fails the `up` (and the preview) before any VM is created.
//
// A new cluster (fresh: Proxmox holds none of its VMs) is checked with placeholder secrets and
// the contract its secrets will keep, at once: its VMs do not wait for the talos provider to
// generate the secrets (an RSA key, up to seconds), which are needed only when the configurations
// are applied. A cluster that has VMs is checked with its own secrets and contract (the contract
// may be older than the one asked for now), which exist already. With static addresses the
// configurations made from the cluster's secrets are the ones applied, so each is generated once.
func CheckConfigs(s Scope, secrets *Secrets, pass PassThrough, helm []talosconfig.Manifest, fresh bool) Configs {
	c := s.Cluster
	gen := generator{cluster: c, pass: pass, helm: helm, own: secrets.own}
	out := Configs{gen: gen, Manifests: gen.manifestsPatch(gen.own.contract), checked: map[string]pulumi.StringOutput{}}

	check, checkManifests := gen.own, out.Manifests
	if fresh {
		check = placeholderSecrets(c.ConfigContract)
		checkManifests = gen.manifestsPatch(check.contract)
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

	// As Addresses.Endpoint: the endpoint, else the bootstrap node's address.
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
			out.checked[n.Name] = gen.configuration(n, gen.own, nodePatch(gen.own), endpointURL, out.Manifests)
		}

		if cfg, ok := out.checked[n.Name]; ok && !fresh {
			checked = append(checked, cfg)
		} else {
			checked = append(checked, gen.configuration(n, check, nodePatch(check), endpointURL, checkManifests))
		}
	}

	var deps []pulumi.Resource
	if !fresh {
		deps = []pulumi.Resource{secrets.Resource}
	}

	out.Checked = pulumi.All(checked...).ApplyT(func([]any) []pulumi.Resource {
		return deps
	}).(pulumi.ResourceArrayOutput)

	return out
}

// Of is node n's configuration to apply: the checked one with static addresses, else generated
// now from the addresses the VMs reported.
func (cs Configs) Of(n spec.Node, addrs Addresses) pulumi.StringOutput {
	if cfg, ok := cs.checked[n.Name]; ok {
		return cfg
	}

	g := cs.gen

	return g.configuration(n, g.own, addrs.nodePatch(g.cluster, n, g.own.contract), addrs.EndpointURL(g.cluster), cs.Manifests)
}

// configuration generates a node's configuration: Talos' own generation, then the component's
// patches, then the user's (cluster-wide, role, node). It is a secret: it holds the cluster's
// keys.
func (g generator) configuration(n spec.Node, src configSource, nodePatch pulumi.StringOutput, endpointURL pulumi.StringOutput,
	manifests pulumi.StringOutput,
) pulumi.StringOutput {
	c := g.cluster

	type source struct {
		from    string
		patches pulumi.StringArrayInput
	}

	sources := []source{{"the component's patch for node " + n.Name, pulumi.StringArray{nodePatch}}}
	if n.Role == spec.RoleControlPlane {
		sources = append(sources, source{"the component's manifests patch", pulumi.StringArray{manifests}},
			source{"configPatches", g.pass.ConfigPatches}, source{"controlPlaneConfigPatches", g.pass.ControlPlaneConfigPatches})
	} else {
		sources = append(sources, source{"configPatches", g.pass.ConfigPatches}, source{"workerConfigPatches", g.pass.WorkerConfigPatches})
	}

	sources = append(sources, source{"nodes." + n.Name + ".configPatches", g.pass.NodeConfigPatches[n.Name]})

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

	// In-process, with the machinery this plugin is built with: the talos provider's
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

// manifestsPatch is the control plane patch with the rendered Helm releases, then the inline
// manifests, and the extra manifests, identical on every control plane. Manifest contents may be
// outputs or secrets.
func (g generator) manifestsPatch(contract pulumi.StringOutput) pulumi.StringOutput {
	contents := []any{contract}
	for _, c := range g.pass.ManifestContents {
		contents = append(contents, c)
	}

	names := make([]string, len(g.cluster.InlineManifests))
	for i, m := range g.cluster.InlineManifests {
		names[i] = m.Name
	}

	for _, m := range g.pass.Generated {
		contents = append(contents, m.Contents)
		names = append(names, m.Name)
	}

	extra := g.cluster.TalosExtraManifests()
	helm := g.helm

	// The first value is the cluster's configuration contract, the rest the manifests' contents.
	return pulumi.All(contents...).ApplyT(func(v []any) (string, error) {
		ms := append([]talosconfig.Manifest{}, helm...)
		for i, c := range v[1:] {
			ms = append(ms, talosconfig.Manifest{Name: names[i], Contents: c.(string)})
		}

		return talosconfig.ManifestsPatch(ms, extra, v[0].(string))
	}).(pulumi.StringOutput)
}
