package lifecycle

import (
	"context"
	"reflect"
	"sort"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// ClusterHealth is the health gate: its create and every update wait until the cluster is
// healthy. The component's outputs come through it.
type ClusterHealth struct{}

// docClusterHealth describes ClusterHealth in the schema.
const docClusterHealth = "Waits until the cluster passes the checks `talosctl health` runs (and every Node is Ready), " +
	"after bootstrap and after every change. Registered by TalosProxmoxCluster."

// ClusterHealthArgs are a ClusterHealth's inputs. Revision changes whenever anything about the
// cluster does (configurations, images), so the gate runs after every change.
type ClusterHealthArgs struct {
	ClusterAccess
	ClusterNodes
	RequireNodesReady bool   `pulumi:"requireNodesReady" doc:"Require every Kubernetes Node to be Ready."`
	Timeout           string `pulumi:"timeout" doc:"How long to wait (a duration)."`
	Revision          string `pulumi:"revision" doc:"Changes whenever the cluster does, so the gate runs again."`
	KubernetesVersion string `pulumi:"kubernetesVersion,optional" doc:"The cluster's Kubernetes version: the gate runs again when it changes."`
}

// ClusterHealthState is the gate's inputs once the cluster passed it.
type ClusterHealthState = ClusterHealthArgs

// Annotate documents the resource.
func (r *ClusterHealth) Annotate(an infer.Annotator) { an.Describe(r, docClusterHealth) }

// Annotate documents the inputs (the kubeconfig more closely than ClusterAccess does).
func (a *ClusterHealthArgs) Annotate(an infer.Annotator) {
	describeFields(an, a)
	an.Describe(&a.Kubeconfig, "Admin kubeconfig of the cluster; passed on once the cluster is healthy.")
}

// Diff runs the gate again whenever an input changes. (The Kubernetes version step is checked by
// the KubernetesUpgrade, which moves the cluster.)
func (r *ClusterHealth) Diff(_ context.Context, req infer.DiffRequest[ClusterHealthArgs, ClusterHealthState]) (infer.DiffResponse, error) {
	return infer.DiffResponse{HasChanges: !reflect.DeepEqual(req.Inputs, req.State)}, nil
}

// Create runs the gate.
func (r *ClusterHealth) Create(ctx context.Context, req infer.CreateRequest[ClusterHealthArgs]) (infer.CreateResponse[ClusterHealthState], error) {
	if req.DryRun {
		return infer.CreateResponse[ClusterHealthState]{ID: "health", Output: req.Inputs}, nil
	}

	return infer.CreateResponse[ClusterHealthState]{ID: "health", Output: req.Inputs}, gate(ctx, req.Inputs)
}

// Update runs the gate again.
func (r *ClusterHealth) Update(ctx context.Context, req infer.UpdateRequest[ClusterHealthArgs, ClusterHealthState]) (infer.UpdateResponse[ClusterHealthState], error) {
	return updated(ctx, req, gate)
}

func gate(ctx context.Context, in ClusterHealthArgs) error {
	timeout, err := parseDuration("timeout", in.Timeout)
	if err != nil {
		return err
	}

	nodes := append(nodesOf(in.ControlPlanes, true), nodesOf(in.Workers, false)...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })

	log := p.GetLogger(ctx)
	start := time.Now()

	if err := day2.Health(ctx, day2.HealthOptions{
		Access: in.access(), Nodes: nodes,
		RequireReady: in.RequireNodesReady, Timeout: timeout, Progress: log.InfoStatus,
	}); err != nil {
		return err
	}

	log.Infof("the cluster is healthy (%d nodes, checked in %s)", len(nodes), time.Since(start).Round(time.Second))

	return nil
}

// ClusterHealthKind registers ClusterHealths.
var ClusterHealthKind = kindOf[ClusterHealth, ClusterHealthArgs, CredentialsOutputs]()
