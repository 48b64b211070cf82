package day2

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/cluster"
	"github.com/siderolabs/talos/pkg/cluster/check"
	"github.com/siderolabs/talos/pkg/conditions"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
)

// HealthOptions describe one run of the health gate.
type HealthOptions struct {
	Access Access
	Nodes  []Node
	// RequireReady adds the all-nodes-Ready check that Talos' defaults skip when the CNI is
	// "none": set when a CNI runs (Talos' default or one given as manifests, e.g. Cilium).
	RequireReady bool
	Timeout      time.Duration
	Progress     Progress
}

// Health runs what `talosctl health` runs (Talos' pkg/cluster/check: etcd, apid, kubelet, boot
// sequence, memory and disks, control plane static pods, kube-proxy, CoreDNS) with the
// Kubernetes node checks limited to the cluster's own nodes (see clusterChecks), plus, with
// RequireReady, every one of them Ready. It waits until all pass or the timeout ends; the error
// names the check and the node that failed it.
func Health(ctx context.Context, o HealthOptions) error {
	cfg, err := clientconfig.FromString(o.Access.Talosconfig)
	if err != nil {
		return fmt.Errorf("reading the talosconfig: %w", err)
	}

	provider := &cluster.ConfigClientProvider{TalosConfig: cfg}
	defer provider.Close() //nolint:errcheck

	info := &clusterInfo{ClientProvider: provider, K8sProvider: &cluster.KubernetesClient{ClientProvider: provider}}

	for _, n := range o.Nodes {
		ip, err := netip.ParseAddr(n.Address)
		if err != nil {
			return fmt.Errorf("node %s: %q is not an IP address", n.Name, n.Address)
		}

		ni := cluster.NodeInfo{InternalIP: ip, IPs: []netip.Addr{ip}}
		if n.ControlPlane {
			info.cps = append(info.cps, ni)
		} else {
			info.workers = append(info.workers, ni)
		}
	}

	kube, err := o.Access.Kube()
	if err != nil {
		return err
	}

	if !o.RequireReady {
		o.Progress.say("skipped: all nodes Ready and CoreDNS (the CNI is none and no CNI manifest is given: nodes stay NotReady until you deploy one)")
	}

	checks := clusterChecks(kube, o.Nodes, o.RequireReady)

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	r := &reporter{progress: o.Progress, start: time.Now()}

	// Talos' etcd checks poll every 5 s; a cluster that is still forming (members joining) would
	// wait up to that long after it is ready. Wait for etcd first at a finer step, for at most half
	// the time; what fails is then reported by Talos' own checks.
	var cps []Node

	for _, n := range o.Nodes {
		if n.ControlPlane {
			cps = append(cps, n)
		}
	}

	// It asks every 250 ms at most: the members join one after the other, and each try is one
	// Talos call per control plane.
	_ = pollOn(ctx, retry.Backoff(100*time.Millisecond, 250*time.Millisecond), o.Timeout/2, "etcd on every control plane", o.Progress, func(ctx context.Context) error {
		_, err := EtcdHealthy(ctx, o.Access, cps)

		return err
	})

	if err := check.Wait(ctx, info, checks, r); err != nil {
		return fmt.Errorf("the cluster is not healthy after %s: %s (the gate runs again at the next `pulumi up`; "+
			"raise health.timeout if the cluster is only slow)", o.Timeout, r.last)
	}

	return nil
}

// clusterInfo is what talosctl health builds: Talos clients from the talosconfig, the
// Kubernetes client from the Kubeconfig API, and the nodes by role.
type clusterInfo struct {
	cluster.ClientProvider
	cluster.K8sProvider
	cps, workers []cluster.NodeInfo
}

func (i *clusterInfo) Nodes() []cluster.NodeInfo { return append(slices.Clone(i.cps), i.workers...) }

func (i *clusterInfo) NodesByType(t machine.Type) []cluster.NodeInfo {
	switch t {
	case machine.TypeControlPlane:
		return i.cps
	case machine.TypeWorker:
		return i.workers
	default:
		return nil
	}
}

// reporter passes each change of a check's state to the progress log, with the time elapsed.
type reporter struct {
	progress Progress
	start    time.Time
	shown    string // the state last reported
	last     string // the last state that says why a check fails (for the timeout's error)
}

func (r *reporter) Update(c conditions.Condition) {
	// The check's description with its state ("…: OK", or the error of its last attempt); from
	// Talos v1.14 String() is the description alone.
	s := conditions.StatusLine(c)
	if s == r.shown {
		return
	}

	r.shown = s
	r.progress.say("health (%s): %s", time.Since(r.start).Round(time.Second), s)

	// The attempt the deadline cuts short says only that: keep what the check said before.
	if !strings.Contains(s, "context deadline exceeded") && !strings.Contains(s, "context canceled") || r.last == "" {
		r.last = s
	}
}
