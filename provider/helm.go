package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// validateAndRender finishes validation: it renders the cluster's Helm releases (Cilium
// first) at plan time, from plain inputs, so preview shows real changes, and checks the size
// budget. A release is rendered even when other inputs are invalid, as long as it and the
// Kubernetes version it renders for are valid, so one error reports the input's problems and
// the charts' together. It returns the rendered releases and the warnings.
func validateAndRender(ctx context.Context, c *spec.Cluster, specErr error) ([]*helmrender.Manifest, []string, error) {
	var invalid *spec.ValidationError
	if specErr != nil && !errors.As(specErr, &invalid) {
		return nil, nil, specErr
	}

	var rels []helmrender.Release

	for _, r := range c.HelmReleases {
		if invalid == nil || !invalid.Has(r.Path) {
			rels = append(rels, r)
		}
	}

	// Without a valid Kubernetes version a chart cannot be rendered, but it can still be
	// fetched: a missing chart or a wrong digest is reported either way.
	fetchOnly := invalid != nil && (invalid.Has("kubernetesVersion") || invalid.Has("talosVersion"))

	var problems []error

	rendered, err := renderReleases(ctx, c.KubernetesVersion, rels, fetchOnly)
	if err != nil {
		problems = append(problems, unjoin(err)...)
	}

	inline := 0
	for _, m := range c.InlineManifests {
		inline += len(m.Contents.Text) // unknown at preview: counted at up
	}

	warning, err := helmrender.CheckBudget(rendered, inline, len(c.ControlPlanes()))
	if err != nil {
		problems = append(problems, err)
	}

	switch {
	case invalid != nil:
		invalid.Add(problems...)
		return nil, nil, invalid
	case len(problems) > 0:
		return nil, nil, &spec.ValidationError{Errors: problems}
	}

	var warnings []string
	if warning != "" {
		warnings = append(warnings, warning)
	}

	return rendered, warnings, nil
}

// renderReleases renders rels, or with fetchOnly only fetches their charts.
func renderReleases(ctx context.Context, kubeVersion string, rels []helmrender.Release, fetchOnly bool) ([]*helmrender.Manifest, error) {
	if len(rels) == 0 {
		return nil, nil
	}

	dir, err := helmrender.DefaultCacheDir()
	if err != nil {
		return nil, err
	}

	r := &helmrender.Renderer{Cache: helmrender.NewCache(dir), KubeVersion: kubeVersion}
	if fetchOnly {
		return nil, r.FetchAll(ctx, rels)
	}

	return r.RenderAll(ctx, rels)
}

// fetchCharts fetches the cluster's charts without rendering them: what fails here (a chart that
// is missing, a digest that does not match) fails whatever Kubernetes version they render for.
func fetchCharts(ctx context.Context, c *spec.Cluster) error {
	if _, err := renderReleases(ctx, c.KubernetesVersion, c.HelmReleases, true); err != nil {
		return &spec.ValidationError{Errors: unjoin(err)}
	}

	return nil
}

// unjoin splits an errors.Join error into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}

	return []error{err}
}

// inlineManifests are the rendered releases as inline manifests `helm-<release>`.
func inlineManifests(rendered []*helmrender.Manifest) []talosconfig.Manifest {
	out := make([]talosconfig.Manifest, len(rendered))
	for i, m := range rendered {
		out[i] = talosconfig.Manifest{Name: helmrender.ManifestName(m.Release), Contents: m.Contents}
	}

	return out
}

// releaseInfos is the helmReleases output.
func releaseInfos(rendered []*helmrender.Manifest) MapOutput[HelmReleaseInfo] {
	out := map[string]HelmReleaseInfo{}

	for _, m := range rendered {
		digest := ""
		if m.Digest != "" {
			digest = "sha256:" + m.Digest
		}

		sum := sha256.Sum256([]byte(m.Contents))
		out[m.Release] = HelmReleaseInfo{
			Chart: m.Chart, Version: m.ChartVersion, Namespace: m.Namespace, Digest: digest,
			ManifestSha256: hex.EncodeToString(sum[:]), Objects: len(m.Objects), Bytes: len(m.Contents),
		}
	}

	return pulumi.ToOutput(out).(MapOutput[HelmReleaseInfo])
}
