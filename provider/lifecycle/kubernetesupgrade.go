package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// KubernetesUpgrade moves a running cluster to a new Kubernetes version the way Talos'
// upgrade-k8s does, component by component and node by node, after the OS upgrades of the same
// `up`. Its create only records the version: a new cluster is created on it.
type KubernetesUpgrade struct{}

// docKubernetesUpgrade describes KubernetesUpgrade in the schema.
const docKubernetesUpgrade = "Upgrades the cluster's Kubernetes when kubernetesVersion changes: kube-apiserver, " +
	"kube-controller-manager and kube-scheduler on each control plane in turn, kube-proxy, then each kubelet, " +
	"in the order `talosctl upgrade-k8s` uses (it moves the components' images; unlike upgrade-k8s it does not " +
	"re-apply Talos' own bootstrap manifests). Registered by TalosProxmoxCluster."

// KubernetesUpgradeArgs are a KubernetesUpgrade's inputs.
type KubernetesUpgradeArgs struct {
	ClusterAccess
	ClusterNodes
	KubernetesVersion string `pulumi:"kubernetesVersion" doc:"The Kubernetes version the cluster runs: a change moves one minor up at a time."`
	Timeout           string `pulumi:"timeout" doc:"How long each component on each node may take (a duration)."`
	CheckReady        bool   `pulumi:"checkReady,optional" doc:"Require each Node to be Ready once its kubelet moves (false for a cluster without a CNI)."`
}

// KubernetesUpgradeState is the version the cluster runs (with the inputs it was reached with).
type KubernetesUpgradeState = KubernetesUpgradeArgs

// Annotate documents the resource.
func (r *KubernetesUpgrade) Annotate(an infer.Annotator) { an.Describe(r, docKubernetesUpgrade) }

// Annotate documents the inputs.
func (a *KubernetesUpgradeArgs) Annotate(an infer.Annotator) { describeFields(an, a) }

// Create records the version: the nodes were configured with it.
func (r *KubernetesUpgrade) Create(_ context.Context, req infer.CreateRequest[KubernetesUpgradeArgs]) (infer.CreateResponse[KubernetesUpgradeState], error) {
	return infer.CreateResponse[KubernetesUpgradeState]{ID: "kubernetes", Output: req.Inputs}, nil
}

// Diff shows an update only when the version changes (other inputs change nothing on the
// nodes); a step Kubernetes does not support fails here, so at preview.
func (r *KubernetesUpgrade) Diff(_ context.Context, req infer.DiffRequest[KubernetesUpgradeArgs, KubernetesUpgradeState]) (infer.DiffResponse, error) {
	from, to := req.State.KubernetesVersion, req.Inputs.KubernetesVersion
	if from == to {
		return infer.DiffResponse{}, nil
	}

	if err := day2.CheckKubernetesStep(from, to); err != nil {
		return infer.DiffResponse{}, fmt.Errorf("kubernetesVersion: %w", err)
	}

	return infer.DiffResponse{
		HasChanges:   true,
		DetailedDiff: map[string]p.PropertyDiff{"kubernetesVersion": {Kind: p.Update}},
	}, nil
}

// Update runs the upgrade. A component that already runs the version (an interrupted run got
// there) is left alone.
func (r *KubernetesUpgrade) Update(ctx context.Context, req infer.UpdateRequest[KubernetesUpgradeArgs, KubernetesUpgradeState]) (infer.UpdateResponse[KubernetesUpgradeState], error) {
	return updated(ctx, req, func(ctx context.Context, in KubernetesUpgradeArgs) error {
		return upgradeKubernetes(ctx, req.State.KubernetesVersion, in)
	})
}

// upgradeKubernetes moves the cluster from the Kubernetes version from to in's, unless it is
// there.
func upgradeKubernetes(ctx context.Context, from string, in KubernetesUpgradeArgs) error {
	if in.KubernetesVersion == from {
		return nil
	}

	if err := day2.CheckKubernetesStep(from, in.KubernetesVersion); err != nil {
		return fmt.Errorf("kubernetesVersion: %w", err)
	}

	timeout, err := parseDuration("timeout", in.Timeout)
	if err != nil {
		return err
	}

	log := p.GetLogger(ctx)
	start := time.Now()

	log.Infof("upgrading Kubernetes %s → %s", from, in.KubernetesVersion)

	res, err := day2.UpgradeKubernetes(ctx, day2.KubernetesUpgradeOptions{
		Access:        in.access(),
		ControlPlanes: nodesOf(in.ControlPlanes, true),
		Workers:       nodesOf(in.Workers, false),
		From:          from,
		To:            in.KubernetesVersion,
		Timeout:       timeout,
		Progress:      log.InfoStatus,
		CheckReady:    in.CheckReady,
	})
	if err != nil {
		return fmt.Errorf("upgrading Kubernetes to %s (done so far: %s; "+
			"run `pulumi up` again to go on): %w", in.KubernetesVersion, orNothing(res.Updated), err)
	}

	log.Infof("Kubernetes %s on every node in %s: %s", in.KubernetesVersion, time.Since(start).Round(time.Second), orNothing(res.Updated))

	return nil
}

func orNothing(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}

	return strings.Join(s, ", ")
}

// KubernetesUpgradeKind registers KubernetesUpgrades.
var KubernetesUpgradeKind = kindOf[KubernetesUpgrade, KubernetesUpgradeArgs, Registered]()
