package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/clientconfigs"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/proxmox"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretsbundle"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// adoptReadTimeout bounds the read of each node to adopt through its Talos API: a preview never
// hangs on a node that does not answer.
const adoptReadTimeout = 20 * time.Second

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
	a := &adoption{adoptees: inv.Adoptees(c)}
	if !a.importing() {
		return a, nil
	}

	changes, problems := proxmox.ReadAdoptees(ctx, opts, c, p, a.adoptees)
	if len(problems) > 0 {
		return nil, &spec.ValidationError{Errors: problems}
	}

	if !c.Secrets.Known {
		_ = ctx.Log.Warn("secrets.bundle is not known yet (it comes from another resource): the nodes to adopt are read "+
			"with it by `up`, before anything is changed", nil)
	} else {
		running, err := readAdoptees(ctx.Context(), c, a.adoptees)
		if err != nil {
			return nil, err
		}

		for _, n := range c.ControlPlanes() {
			if r, ok := running[n.Name]; ok && a.contract == "" {
				a.contract = contractOf(r.Version)
				a.kubernetes = r.KubernetesVersion
			}
		}

		if c.KubernetesDeclared && a.kubernetes != "" && a.kubernetes != c.KubernetesVersion {
			return nil, fmt.Errorf("kubernetesVersion: the cluster to adopt runs Kubernetes %s; adopt it with that version "+
				"(or leave kubernetesVersion unset), then change it in the next up, which upgrades it", a.kubernetes)
		}

		for _, n := range c.Nodes {
			if r, ok := running[n.Name]; ok {
				x := a.adoptees[n.Name]
				msg := fmt.Sprintf("%s: adopting VM %d on %s (Talos %s): imported as it is", n.Name, x.VMID, x.Host, r.Version)

				if ch := changes[n.Name]; len(ch) > 0 {
					msg += "; then changed as declared: " + strings.Join(ch, "; ")
				}

				_ = ctx.Log.Info(msg, nil)
			}
		}
	}

	return a, nil
}

// readAdoptees reads what each node to import runs, in parallel.
func readAdoptees(ctx context.Context, c *spec.Cluster, adoptees map[string]proxmox.Adoptee) (map[string]day2.Running, error) {
	s := c.Secrets.Parsed
	os := s.Certs["os"]

	var endpoints []string
	for _, n := range c.ControlPlanes() {
		endpoints = append(endpoints, n.IP)
	}

	tc, err := clientconfigs.Talosconfig(clientconfigs.Input{
		ClusterName: c.Name, OSCA: clientconfigs.CertAndKey{Cert: os.Cert, Key: os.Key},
		TalosEndpoints: endpoints, TalosNodes: endpoints, Validity: time.Hour, Now: time.Now(),
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", secretsbundle.Field, err)
	}

	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		out  = map[string]day2.Running{}
		errs []error
	)

	for _, n := range c.Nodes {
		if x, ok := adoptees[n.Name]; !ok || !x.Import {
			continue
		}

		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, adoptReadTimeout)
			defer cancel()

			r, err := day2.ReadRunning(ctx, day2.Access{Talosconfig: tc}, day2.Node{Name: n.Name, Address: n.IP, ControlPlane: n.Role == spec.RoleControlPlane})

			mu.Lock()
			defer mu.Unlock()

			switch {
			case errors.Is(err, day2.ErrForeignCA):
				errs = append(errs, fmt.Errorf("%s: the cluster's CA does not match: node %s at %s does not trust the Talos CA of the "+
					"bundle (certs.os), so the bundle is another cluster's; give the secrets this cluster was made with. Nothing was changed",
					secretsbundle.Field, n.Name, n.IP))
			case err != nil:
				errs = append(errs, fmt.Errorf("nodes.%s: adopting the node needs its Talos API at %s:50000, which did not answer: %w; "+
					"nothing was changed", n.Name, n.IP, err))
			default:
				out[n.Name] = r
			}
		})
	}

	wg.Wait()

	if len(errs) > 0 {
		return nil, &spec.ValidationError{Errors: errs}
	}

	return out, nil
}

// contractOf is the configuration contract of a Talos version ("v1.11.5" → "v1.11").
func contractOf(version string) string {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return ""
	}

	return "v" + parts[0] + "." + parts[1]
}
