package provider

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/proxmox"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// adoption is what taking over a running cluster (secrets.bundle) found before anything is
// registered: the nodes whose VMs exist without the component having made them, and, when this
// `up` imports them, what their control planes run.
type adoption struct {
	adoptees map[string]proxmox.Adoptee
	// contract is the configuration contract of the Talos minor the nodes run ("" when nothing
	// is imported now: the secrets keep the one they were adopted with).
	contract string
	// kubernetes is the Kubernetes version the control planes run ("" when unknown).
	kubernetes string
	// running is what each node to import runs, and talosconfig what reached it (issued from
	// the bundle).
	running     map[string]day2.Running
	talosconfig string
	// images are the Talos images already on the hosts, by download key: the VMs made later
	// (a node added, a replacement) use them instead of a download.
	images map[string]plan.Existing
}

// importing tells whether this `up` imports VMs (the first adopting `up`).
func (a *adoption) importing() bool {
	for _, x := range a.adoptees {
		if x.Import {
			return true
		}
	}

	return false
}

// checkAdoption finds the nodes to adopt and checks, before anything is registered, that they can
// be: each VM to import is read from Proxmox and compared with its declaration (changes are
// logged with their effect; a change that would lose data is refused), and each node is read
// through its Talos API with a client certificate issued from the bundle: a node that does not
// trust the bundle's CA refuses the adoption (the bundle is another cluster's).
func checkAdoption(ctx *pulumi.Context, c *spec.Cluster, inv *proxmox.Inventory, p *plan.Plan, opts []pulumi.ResourceOption) (*adoption, error) {
	if err := inv.AdoptedWithoutBundle(c); err != nil {
		return nil, err
	}

	a := &adoption{adoptees: inv.Adoptees(c)}
	if problems := proxmox.AdopteeProblems(c, a.adoptees); len(problems) > 0 {
		return nil, &spec.ValidationError{Errors: problems}
	}

	if len(a.adoptees) > 0 {
		var err error
		if a.images, err = proxmox.ImagesOnHosts(ctx, opts, c, p); err != nil {
			return nil, err
		}
	}

	if !a.importing() {
		return a, checkBundle(ctx, c, inv)
	}

	changes, problems := proxmox.ReadAdoptees(ctx, opts, c, p, a.adoptees)
	if len(problems) > 0 {
		return nil, &spec.ValidationError{Errors: problems}
	}

	if !c.Secrets.Known {
		_ = ctx.Log.Warn("secrets.bundle is not known yet (it comes from another resource): the nodes to adopt are read "+
			"with it by `up`, before anything is changed", nil)
		logAdoptees(ctx, c, a, changes)

		return a, nil
	}

	running, tc, err := readAdoptees(ctx.Context(), c, a.adoptees)
	if err != nil {
		return nil, err
	}

	a.running, a.talosconfig = running, tc

	if problems := securityMismatches(c, running); len(problems) > 0 {
		return nil, &spec.ValidationError{Errors: problems}
	}

	for _, n := range c.ControlPlanes() {
		if r, ok := running[n.Name]; ok && a.kubernetes == "" {
			a.kubernetes = r.KubernetesVersion
			// The configurations keep the contract declared, else the running Talos minor's.
			if !c.ContractDeclared {
				a.contract = contractOf(r.Version)
			}
		}
	}

	if c.KubernetesDeclared && a.kubernetes != "" && a.kubernetes != c.KubernetesVersion {
		return nil, fmt.Errorf("kubernetesVersion: the cluster to adopt runs Kubernetes %s; adopt it with that version "+
			"(or leave kubernetesVersion unset), then change it in the next up, which upgrades it", a.kubernetes)
	}

	logAdoptees(ctx, c, a, changes)

	return a, nil
}

// logAdoptees says at preview and `up`, for each node imported now, what becomes of it: the VM
// as it is, then its declared changes; what it runs, and an upgrade when it runs another Talos
// version or image than declared (NodeUpgrade upgrades it, with a reboot, in this `up`).
func logAdoptees(ctx *pulumi.Context, c *spec.Cluster, a *adoption, changes map[string][]string) {
	for _, n := range c.Nodes {
		x, ok := a.adoptees[n.Name]
		if !ok || !x.Import {
			continue
		}

		msg := fmt.Sprintf("%s: adopting VM %d on %s", n.Name, x.VMID, x.Host)
		r, read := a.running[n.Name]

		if read {
			msg += fmt.Sprintf(" (Talos %s)", r.Version)
		}

		msg += ": imported as it is"
		if ch := changes[n.Name]; len(ch) > 0 {
			msg += "; then changed as declared: " + strings.Join(ch, "; ")
		}

		_ = ctx.Log.Info(msg, nil)

		if read && (r.Version != c.TalosVersion || r.Schematic != c.ImageOf(n).SchematicID) {
			_ = ctx.Log.Warn(fmt.Sprintf("%s: adopted: runs Talos %s (schematic %q), the declaration says %s (schematic %.12s…): "+
				"this up upgrades it in place, with a reboot; declare talosVersion and image as the node runs them to adopt "+
				"it without one", n.Name, r.Version, short(r.Schematic), c.TalosVersion, c.ImageOf(n).SchematicID), nil)
		}
	}
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}

	return s
}

// checkBundle checks a secrets.bundle given to a running cluster the component made against one
// of its control planes: another cluster's bundle is refused before any node is reconfigured with
// it. A control plane that does not answer is only a warning: the configuration applies will
// fail on it anyway, one node at a time.
func checkBundle(ctx *pulumi.Context, c *spec.Cluster, inv *proxmox.Inventory) error {
	n, ok := inv.BundleCheckNode(c)
	if !ok {
		return nil
	}

	tc, err := bundleTalosconfig(c)
	if err == nil {
		_, err = readNode(ctx.Context(), tc, c, n)
	}

	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNotTheClusters):
		return err
	default:
		_ = ctx.Log.Warn(fmt.Sprintf("secrets.bundle could not be checked against %s: %v", n.Name, err), nil)
		return nil
	}
}

// contractOf is the configuration contract of a Talos version ("v1.11.5" → "v1.11").
func contractOf(version string) string {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return ""
	}

	return "v" + parts[0] + "." + parts[1]
}

// securityMismatches are the nodes to adopt whose Secure Boot or system volume keys, as they
// report them, differ from the declaration: Talos fixes both at installation, and the component
// never replaces an adopted VM to change them, so the declaration must say what the node runs.
func securityMismatches(c *spec.Cluster, running map[string]day2.Running) []error {
	var problems []error

	for _, n := range c.Nodes {
		r, ok := running[n.Name]
		if !ok || !r.Security.Known {
			continue
		}

		sec := r.Security
		if declared := c.ImageOf(n).SecureBoot; declared != sec.SecureBoot {
			problems = append(problems, fmt.Errorf("nodes.%s.image.secureBoot: the node to adopt runs with Secure Boot %s, the "+
				"declaration says %s; an adopted node keeps how it was installed: declare secureBoot: %v for it (a node's "+
				"image.secureBoot), or replace it later as a new node", n.Name, onOff(sec.SecureBoot), onOff(declared), sec.SecureBoot))
		}

		for _, v := range []struct{ field, runs, declared string }{
			{"state", sec.StateKey, n.DiskEncryption.State}, {"ephemeral", sec.Ephemeral, n.DiskEncryption.Ephemeral},
		} {
			switch {
			case v.runs == v.declared:
			case v.runs != "" && v.runs != spec.KeyTPM && v.runs != spec.KeyNodeID:
				problems = append(problems, fmt.Errorf("nodes.%s.diskEncryption.%s: the node to adopt has its %s volume encrypted "+
					"with keys (%s) the component cannot declare (one tpm or nodeID key); it cannot adopt this node: install it "+
					"anew with tpm or nodeID keys, or keep managing it with its own tool", n.Name, v.field, strings.ToUpper(v.field), v.runs))
			default:
				problems = append(problems, fmt.Errorf("nodes.%s.diskEncryption.%s: the node to adopt has its %s volume %s, the "+
					"declaration says %s; an adopted node keeps how it was installed: declare it as it runs",
					n.Name, v.field, strings.ToUpper(v.field), keyText(v.runs), keyText(v.declared)))
			}
		}
	}

	return problems
}

func onOff(b bool) string { return map[bool]string{true: "on", false: "off"}[b] }

func keyText(k string) string {
	if k == "" {
		return "unencrypted"
	}

	return "encrypted with " + k
}
