package talosemu_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/cluster"
	"github.com/siderolabs/talos/pkg/cluster/check"
	"github.com/siderolabs/talos/pkg/conditions"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// labClusterInfo is what talosctl health builds: a Talos client from the talosconfig, the
// Kubernetes client from the Kubeconfig API, and the node list.
type labClusterInfo struct {
	cluster.ClientProvider
	cluster.K8sProvider
	cps, workers []cluster.NodeInfo
}

func (i *labClusterInfo) Nodes() []cluster.NodeInfo { return append(slices.Clone(i.cps), i.workers...) }

func (i *labClusterInfo) NodesByType(t machine.Type) []cluster.NodeInfo {
	switch t {
	case machine.TypeControlPlane:
		return i.cps
	case machine.TypeWorker:
		return i.workers
	default:
		return nil
	}
}

func healthInfo(t *testing.T, cps, workers []*talosemu.Node) *labClusterInfo {
	t.Helper()

	info := func(ns []*talosemu.Node) []cluster.NodeInfo {
		var out []cluster.NodeInfo
		for _, n := range ns {
			ip := netip.MustParseAddr(n.IP())
			out = append(out, cluster.NodeInfo{InternalIP: ip, IPs: []netip.Addr{ip}})
		}

		return out
	}

	provider := &cluster.ConfigClientProvider{TalosConfig: sharedBundle(t).ClientConfig(cps[0].IP())}
	t.Cleanup(func() { provider.Close() }) //nolint:errcheck

	return &labClusterInfo{
		ClientProvider: provider,
		K8sProvider:    &cluster.KubernetesClient{ClientProvider: provider},
		cps:            info(cps), workers: info(workers),
	}
}

// runHealth runs Talos' own health checks (what `talosctl health` runs) for at most d.
func runHealth(t *testing.T, ci *labClusterInfo, d time.Duration) error {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()

	return check.Wait(ctx, ci, check.DefaultClusterChecks(), &healthReporter{t: t})
}

type healthReporter struct {
	t    *testing.T
	last string
}

func (r *healthReporter) Update(c conditions.Condition) {
	if s := c.String(); s != r.last {
		r.last = s
		r.t.Logf("health: %s", s)
	}
}
