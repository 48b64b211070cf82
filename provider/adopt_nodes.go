package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/await"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/clientconfigs"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/proxmox"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/redact"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretsbundle"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// The nodes of a cluster to adopt, read through their Talos API with the bundle's credentials:
// what they run, whether the bundle is theirs, and at preview whether their configuration changes.

// adoptReadTimeout bounds the read of each node to adopt through its Talos API: a preview never
// hangs on a node that does not answer.
const adoptReadTimeout = 20 * time.Second

// readAdoptees reads what each node to import runs, in parallel.
func readAdoptees(ctx context.Context, c *spec.Cluster, adoptees map[string]proxmox.Adoptee) (map[string]day2.Running, string, error) {
	tc, err := bundleTalosconfig(c)
	if err != nil {
		return nil, "", err
	}

	type read struct {
		node string
		r    day2.Running
		err  error
	}

	reads := make(chan read)
	asked := 0

	for _, n := range c.Nodes {
		if x, ok := adoptees[n.Name]; !ok || !x.Import {
			continue
		}

		asked++

		go func() {
			r, err := readNode(ctx, tc, c, n)
			reads <- read{n.Name, r, err}
		}()
	}

	out := map[string]day2.Running{}

	var errs []error

	for range asked {
		switch got := <-reads; {
		case got.err != nil:
			errs = append(errs, got.err)
		default:
			out[got.node] = got.r
		}
	}

	// The nodes answer in any order; their problems are reported in one.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })

	if len(errs) > 0 {
		return nil, "", &spec.ValidationError{Errors: errs}
	}

	return out, tc, nil
}

// bundleTalosconfig is a talosconfig (valid an hour) issued from secrets.bundle's Talos API CA,
// with the control planes as endpoints: how the nodes of a cluster to adopt are read.
func bundleTalosconfig(c *spec.Cluster) (string, error) {
	os := c.Secrets.Parsed.Certs["os"]

	var endpoints []string
	for _, n := range c.ControlPlanes() {
		endpoints = append(endpoints, n.IP)
	}

	tc, err := clientconfigs.Talosconfig(clientconfigs.Input{
		ClusterName: c.Name, OSCA: clientconfigs.CertAndKey{Cert: os.Cert, Key: os.Key},
		TalosEndpoints: endpoints, TalosNodes: endpoints, Validity: time.Hour, Now: time.Now(),
	})
	if err != nil {
		return "", fmt.Errorf("%s: %w", secretsbundle.Field, err)
	}

	return tc, nil
}

// errNotTheClusters marks a bundle that is not the running cluster's (readNode).
var errNotTheClusters = errors.New("the cluster's CA does not match")

// readNode reads what node n runs with talosconfig tc (issued from the bundle), within
// adoptReadTimeout, and checks the bundle against it: the node trusts its Talos CA, and its
// configuration holds the bundle's other CAs and token.
func readNode(ctx context.Context, tc string, c *spec.Cluster, n spec.Node) (day2.Running, error) {
	ctx, cancel := context.WithTimeout(ctx, adoptReadTimeout)
	defer cancel()

	r, err := day2.ReadRunning(ctx, day2.Access{Talosconfig: tc}, day2.Node{Name: n.Name, Address: n.IP, ControlPlane: n.Role == spec.RoleControlPlane})

	switch {
	case errors.Is(err, day2.ErrForeignCA):
		return r, fmt.Errorf("%s: %w: node %s at %s does not trust the Talos CA of the "+
			"bundle (certs.os), so the bundle is another cluster's; give the secrets this cluster was made with. Nothing was changed",
			secretsbundle.Field, errNotTheClusters, n.Name, n.IP)
	case err != nil:
		return r, fmt.Errorf("nodes.%s: adopting the node needs its Talos API at %s:50000, which did not answer: %w; "+
			"nothing was changed", n.Name, n.IP, err)
	}

	differ, err := day2.SecretsMismatch(r.Config, c.Secrets.Parsed)
	if err != nil {
		differ = []string{"secrets (its configuration cannot be read: " + err.Error() + ")"}
	}

	if len(differ) > 0 {
		return r, fmt.Errorf("%s: %w: node %s runs other %s than the bundle "+
			"(a bundle from before a `talosctl rotate-ca`, or another cluster's); give the secrets this cluster runs. "+
			"Nothing was changed", secretsbundle.Field, errNotTheClusters, n.Name, strings.Join(differ, ", "))
	}

	return r, nil
}

// describeAdoptedConfigs says at preview, for every node this `up` imports, whether the
// configuration the component generates for it (configs, by node) is the one it runs — then
// nothing is applied — or what changes, redacted, and whether Talos applies it live or reboots
// (the node is asked, a dry run). The NodeConfig that applies it cannot say so at preview: the
// credentials it reaches the node with are issued by the `up`.
func describeAdoptedConfigs(ctx *pulumi.Context, comp pulumi.Resource, c *spec.Cluster, a *adoption, configs map[string]pulumi.StringOutput) {
	if !ctx.DryRun() || len(a.running) == 0 {
		return
	}

	log := func(warn bool, msg string) {
		if warn {
			_ = ctx.Log.Warn(msg, &pulumi.LogArgs{Resource: comp})
		} else {
			_ = ctx.Log.Info(msg, &pulumi.LogArgs{Resource: comp})
		}
	}

	for _, n := range c.Nodes {
		running, ok := a.running[n.Name]
		if !ok {
			continue
		}

		wait, cancel := context.WithTimeout(ctx.Context(), time.Minute)
		declared, known, err := await.Known[string](wait, configs[n.Name])
		cancel()

		if err != nil || !known {
			continue // not known at this preview (a patch from another resource): the up says
		}

		if day2.SameConfig(running.Config, declared) {
			log(false, n.Name+": adopted: runs the declared configuration already; nothing will be applied")
			continue
		}

		summary := "the configurations could not be compared"
		if from, errA := redact.Config(running.Config); errA == nil {
			if to, errB := redact.Config(declared); errB == nil {
				if changes, err := redact.Changes(from, to); err == nil {
					summary = redact.Summary(changes)
				}
			}
		}

		wait, cancel = context.WithTimeout(ctx.Context(), adoptReadTimeout)
		plan, err := day2.PlanConfig(wait, day2.ConfigOptions{
			Access: day2.Access{Talosconfig: a.talosconfig},
			Node:   day2.Node{Name: n.Name, Address: n.IP, ControlPlane: n.Role == spec.RoleControlPlane},
			Config: declared,
		}, false)
		cancel()

		switch {
		case err != nil:
			log(true, fmt.Sprintf("%s: adopted: configuration changes: %s; the node could not be asked how it applies them (%v)", n.Name, summary, err))
		case plan.Reboot:
			log(true, fmt.Sprintf("%s: adopted: configuration changes: %s; reboots", n.Name, summary))
		default:
			log(false, fmt.Sprintf("%s: adopted: configuration changes: %s; applies live", n.Name, summary))
		}
	}
}
