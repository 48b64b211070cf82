package checks

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/configuration.md from the schema")

// configurationDoc is docs/configuration.md: every input and output of the component, from the
// schema's own descriptions (which state each default), so the page cannot drift from what the
// SDKs document. `make codegen` rewrites it.
const configurationDoc = "../../docs/configuration.md"

func TestConfigurationDocIsCurrent(t *testing.T) {
	t.Parallel()

	raw, err := provider.Schema(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	got, err := renderConfigurationDoc(raw)
	if err != nil {
		t.Fatal(err)
	}

	if *updateDocs {
		if err := os.WriteFile(configurationDoc, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}

		return
	}

	want, err := os.ReadFile(configurationDoc)
	if err != nil || string(want) != got {
		t.Fatalf("docs/configuration.md is stale (%v): run `make codegen` and commit the result", err)
	}
}

type schemaProp struct {
	Type                 string      `json:"type"`
	Ref                  string      `json:"$ref"`
	Items                *schemaProp `json:"items"`
	AdditionalProperties *schemaProp `json:"additionalProperties"`
	Plain                bool        `json:"plain"`
	Secret               bool        `json:"secret"`
	Description          string      `json:"description"`
}

type schemaObject struct {
	Description     string                `json:"description"`
	Properties      map[string]schemaProp `json:"properties"`
	InputProperties map[string]schemaProp `json:"inputProperties"`
	Required        []string              `json:"required"`
	RequiredInputs  []string              `json:"requiredInputs"`
}

func renderConfigurationDoc(raw []byte) (string, error) {
	var s struct {
		Resources map[string]schemaObject `json:"resources"`
		Types     map[string]schemaObject `json:"types"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}

	comp, ok := s.Resources[provider.ClusterToken]
	if !ok {
		return "", fmt.Errorf("the schema has no %s", provider.ClusterToken)
	}

	var b strings.Builder

	b.WriteString("<!-- Generated from the schema by `make codegen` (provider/checks/docs_test.go); do not edit. -->\n\n")
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("Every input and output of `" + provider.ClusterToken + "`, with its default, as the SDKs document it.\n")
	b.WriteString("Names are the schema's (YAML, TypeScript); Python uses snake_case (`memoryMib` → `memory_mib`),\n")
	b.WriteString("Go uses PascalCase (`MemoryMib`). *plain* inputs must be known values at preview (they shape the\n")
	b.WriteString("resource graph); the others accept outputs and secrets.\n\n")
	b.WriteString(comp.Description + "\n\n")
	b.WriteString(talosVersionsSection())

	b.WriteString("## Inputs\n\n")
	table(&b, comp.InputProperties, comp.RequiredInputs)

	seen := map[string]bool{}
	types(&b, s.Types, refs(comp.InputProperties), seen)

	b.WriteString("## Outputs\n\n")
	table(&b, comp.Properties, nil)
	types(&b, s.Types, refs(comp.Properties), seen)

	return b.String(), nil
}

// talosVersionsSection is the supported Talos minors, from spec.SupportedTalos, and what the
// component generates for each configuration contract.
func talosVersionsSection() string {
	var b strings.Builder

	b.WriteString("## Talos versions\n\n")
	b.WriteString("| Talos | Kubernetes (default) | configuration contract of a new cluster |\n|---|---|---|\n")

	minors := slices.Collect(maps.Keys(spec.SupportedTalos))
	slices.Sort(minors)

	for _, m := range minors {
		tm := spec.SupportedTalos[m]
		fmt.Fprintf(&b, "| %s | v1.%d–v1.%d (%s) | %s |\n", m, tm.OldestKubernetesMinor, tm.NewestKubernetesMinor, tm.DefaultKubernetes, spec.ContractFor(m))
	}

	b.WriteString(`
The machine configuration is generated in-process with Talos' own machinery (v1.14.1), for the
*configuration contract* the cluster was created with: the Talos minor of its first ` + "`talosVersion`" + `
(the newest written is ` + spec.NewestContract + `). The contract is kept in the machine secrets and never changes with an OS
upgrade (a cluster created on v1.11 keeps single-document configurations on v1.13), because
switching formats under running nodes is a known source of breakage.

- **up to v1.11**: one v1alpha1 document; the component sets ` + "`machine.network`" + ` (hostname, interface by
  MAC or physical, address, route, VIP, nameservers), ` + "`machine.time`" + `, ` + "`machine.disks`" + ` and kubelet mounts,
  ` + "`machine.nodeLabels`" + ` and ` + "`machine.nodeTaints`" + ` (the node's ` + "`taints`" + `).
- **v1.12 and v1.13**: the v1alpha1 document without the deprecated network, time and disk fields, and
  ` + "`HostnameConfig`" + ` (the node name, ` + "`auto: off`" + `), ` + "`LinkAliasConfig`" + ` ` + "`net0`" + ` (by MAC, or the VM's virtio
  NIC), ` + "`LinkConfig`" + ` (address and default route) or ` + "`DHCPv4Config`" + `, ` + "`Layer2VIPConfig`" + ` on control planes,
  ` + "`ResolverConfig`" + `, ` + "`TimeSyncConfig`" + `, and a ` + "`UserVolumeConfig`" + ` for each data disk whose ` + "`mountPath`" + ` is
  ` + "`/var/mnt/<name>`" + ` (selected by the udev link of its serial); a data disk mounted elsewhere (e.g.
  Longhorn's default ` + "`/var/lib/longhorn`" + `) stays in ` + "`machine.disks`" + ` with a kubelet bind mount, because a
  user volume mounts only under /var/mnt and pods read host paths from the host, not the kubelet.
- **v1.14**: Kubernetes and the installer move to documents too. The v1alpha1 document keeps only
  ` + "`machine.certSANs`" + ` and etcd's subnet; the component writes ` + "`UnattendedInstallConfig`" + ` (installer image,
  install disk), ` + "`KubeNodeConfig`" + ` (labels, taints, node IP subnet, the control-plane taint removed when
  ` + "`allowSchedulingOnControlPlanes`" + `), ` + "`KubeNetworkConfig`" + `, ` + "`KubeAPIServerConfig`" + ` (certificate SANs),
  with Cilium ` + "`KubeFlannelCNIConfig`" + ` deleted and ` + "`KubeProxyConfig`" + ` disabled, inline and extra manifests as
  ` + "`KubeInlineManifestConfig`" + ` and ` + "`KubeExternalManifestConfig`" + `, and the network, time and volume documents of
  v1.13. The kubelet has no bind mounts any more: a data disk's ` + "`mountPath`" + ` must be
  ` + "`/var/mnt/<name>`" + ` (or set ` + "`configContract: v1.13`" + `), and user patches of ` + "`machine.kubelet`" + `, ` + "`cluster.*`" + ` or ` + "`machine.install`" + ` must be written
  as those documents (the error says which). The Kubernetes upgrade patches the images where the
  configuration has them (machinery's stdpatches).

Every node's configuration is generated and validated before any VM is created (and at preview):
with the cluster's own secrets and format once it runs, and for a new cluster with placeholder
secrets in the format its secrets will keep, so its VMs need not wait for the secrets' RSA key. Patches (` + "`configPatches`" + ` and friends) may be strategic merges, whole extra documents (e.g. a
` + "`UserVolumeConfig`" + `) or, up to contract v1.11, JSON patches; from v1.12 Talos rejects JSON patches on a
multi-document configuration and a ` + "`machine.network.hostname`" + ` beside the ` + "`HostnameConfig`" + ` document:
the error names the patch and says what to write instead.

## Node labels and taints

A node's ` + "`labels`" + ` and ` + "`taints`" + ` (over ` + "`nodeDefaults.taints`" + `), its topology labels and, on control
planes, the ` + "`node-role.kubernetes.io/control-plane:NoSchedule`" + ` taint unless
` + "`allowSchedulingOnControlPlanes`" + `, are in its configuration (` + "`machine.nodeLabels`" + `/` + "`machine.nodeTaints`" + `,
or ` + "`KubeNodeConfig`" + ` from contract v1.14). Talos applies them to the Kubernetes Node itself and records
which it set (the Node's ` + "`talos.dev/owned-labels`" + ` and ` + "`talos.dev/owned-taints`" + ` annotations): a label or
taint removed from the declaration is removed from the Node, one set by someone else with another
value is left alone. Talos writes a worker's Node with the kubelet's credentials, which the
NodeRestriction admission plugin forbids to change taints or to set labels of the kubernetes.io and
k8s.io namespaces (other than the kubelet's own: node.kubernetes.io/, kubelet.kubernetes.io/ and the
well-known ones). So a worker's kubelet registers with its taints (` + "`registerWithTaints`" + `: written in
` + "`machine.kubelet.extraConfig`" + ` before contract v1.14, by Talos itself from v1.14, which restarts the
kubelet when they change), and after applying a worker's new configuration the component sets its
labels and taints on the Node itself, with the admin credentials and the same ownership rules (leaving
Talos' ` + "`extensions.talos.dev/`" + ` labels to Talos), so Talos finds no taint left to change; restricted labels
on a worker are refused at preview. Changing any of them applies live, without a reboot; the preview
shows the configuration change and says so.

`)

	return b.String()
}

// types writes a section per object type in queue and the types they refer to, once each.
func types(b *strings.Builder, all map[string]schemaObject, queue []string, seen map[string]bool) {
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]

		if seen[ref] {
			continue
		}

		seen[ref] = true
		t := all[ref]

		fmt.Fprintf(b, "### %s\n\n%s\n\n", typeName(ref), t.Description)
		table(b, t.Properties, t.Required)
		queue = append(queue, refs(t.Properties)...)
	}
}

func table(b *strings.Builder, props map[string]schemaProp, required []string) {
	b.WriteString("| name | type | description |\n|---|---|---|\n")

	for _, name := range slices.Sorted(maps.Keys(props)) {
		p := props[name]

		var notes []string
		if slices.Contains(required, name) {
			notes = append(notes, "required")
		}

		if p.Plain {
			notes = append(notes, "plain")
		}

		if p.Secret {
			notes = append(notes, "secret")
		}

		kind := typeOf(p)
		if len(notes) > 0 {
			kind += " (" + strings.Join(notes, ", ") + ")"
		}

		desc := strings.ReplaceAll(strings.ReplaceAll(p.Description, "\n", " "), "|", "\\|")
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", name, kind, desc)
	}

	b.WriteString("\n")
}

func typeOf(p schemaProp) string {
	switch {
	case p.Ref != "":
		return "[" + typeName(p.Ref) + "](#" + strings.ToLower(typeName(p.Ref)) + ")"
	case p.Type == "array" && p.Items != nil:
		return "list of " + typeOf(*p.Items)
	case p.Type == "object" && p.AdditionalProperties != nil:
		return "map of " + typeOf(*p.AdditionalProperties)
	case p.Type == "":
		return "any"
	default:
		return p.Type
	}
}

func typeName(ref string) string { return ref[strings.LastIndex(ref, ":")+1:] }

// refs lists the object types props refer to, in property order.
func refs(props map[string]schemaProp) []string {
	var out []string

	var walk func(p schemaProp)
	walk = func(p schemaProp) {
		switch {
		case p.Ref != "":
			out = append(out, strings.TrimPrefix(p.Ref, "#/types/"))
		case p.Items != nil:
			walk(*p.Items)
		case p.AdditionalProperties != nil:
			walk(*p.AdditionalProperties)
		}
	}

	for _, name := range slices.Sorted(maps.Keys(props)) {
		walk(props[name])
	}

	return out
}

// TestReadmeLinksEveryDoc keeps the README short and every reference page reachable from it,
// and every relative link in the README and docs/ pointing at a file that exists.
func TestReadmeLinksEveryDoc(t *testing.T) {
	t.Parallel()

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}

	if n := strings.Count(string(readme), "\n"); n > 200 {
		t.Errorf("README.md has %d lines; keep it under 200 and move reference material to docs/", n)
	}

	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}

	for _, p := range pages {
		if !strings.Contains(string(readme), "(docs/"+filepath.Base(p)+")") {
			t.Errorf("README.md does not link docs/%s", filepath.Base(p))
		}
	}

	link := regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)

	for _, f := range append([]string{"../../README.md"}, pages...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}

		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), m[1])); err != nil {
				t.Errorf("%s links %s, which does not exist", f, m[1])
			}
		}
	}
}
