package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// Size budget of the bootstrap manifests, counted as Pulumi state holds them: every control
// plane's machine configuration carries them, and state stores each configuration.
const (
	manifestsWarnBytes  = 1 << 20
	manifestsLimitBytes = 4 << 20
)

// renderHelm renders the cluster's Helm releases (Cilium first) at plan time, from plain
// inputs, so preview shows real changes. It returns one inline manifest `helm-<release>` per
// release, and warnings.
func renderHelm(ctx context.Context, c *spec.Cluster) ([]*helmrender.Manifest, []string, error) {
	if len(c.HelmReleases) == 0 {
		return nil, nil, checkManifestBudget(c, nil)
	}

	dir, err := helmrender.DefaultCacheDir()
	if err != nil {
		return nil, nil, err
	}

	r := &helmrender.Renderer{Cache: helmrender.NewCache(dir), KubeVersion: c.KubernetesVersion}

	rels := make([]helmrender.Release, len(c.HelmReleases))
	for i, h := range c.HelmReleases {
		rels[i] = helmrender.Release{
			Path: h.Path, Name: h.Name, Namespace: h.Namespace, Values: h.Values, IncludeCRDs: h.IncludeCRDs,
			Hint:   h.Hint,
			Source: helmrender.Source{Chart: h.Chart, Repository: h.Repository, Version: h.Version, Digest: h.Digest},
		}
	}

	rendered, err := r.RenderAll(ctx, rels)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid TalosProxmoxCluster inputs: %w", err)
	}

	if err := checkManifestBudget(c, rendered); err != nil {
		return nil, nil, err
	}

	var warnings []string
	if w := manifestBudgetWarning(c, rendered); w != "" {
		warnings = append(warnings, w)
	}

	return rendered, warnings, nil
}

// inlineManifests are the rendered releases as inline manifests `helm-<release>`.
func inlineManifests(rendered []*helmrender.Manifest) []talosconfig.Manifest {
	out := make([]talosconfig.Manifest, len(rendered))
	for i, m := range rendered {
		out[i] = talosconfig.Manifest{Name: "helm-" + m.Release, Contents: m.Contents}
	}

	return out
}

// releaseInfos is the helmReleases output.
func releaseInfos(rendered []*helmrender.Manifest) HelmReleaseInfoMapOutput {
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

	return pulumi.ToOutput(out).(HelmReleaseInfoMapOutput)
}

// manifestSizes lists the bootstrap manifests' sizes, largest contributors named.
func manifestSizes(c *spec.Cluster, rendered []*helmrender.Manifest) (int, string) {
	total := 0

	var parts []string

	for _, m := range rendered {
		total += len(m.Contents)
		parts = append(parts, fmt.Sprintf("%s %s %s", m.Chart, m.ChartVersion, size(len(m.Contents))))
	}

	inline := 0
	for _, m := range c.InlineManifests {
		inline += len(m.Contents.Text)
	}

	if inline > 0 {
		total += inline
		parts = append(parts, "inlineManifests "+size(inline))
	}

	return total, strings.Join(parts, ", ")
}

// stateBytes is what the bootstrap manifests add to Pulumi state: once per control plane.
func stateBytes(c *spec.Cluster, perConfig int) int {
	return perConfig * max(1, len(c.ControlPlanes()))
}

func checkManifestBudget(c *spec.Cluster, rendered []*helmrender.Manifest) error {
	total, parts := manifestSizes(c, rendered)
	if stateBytes(c, total) <= manifestsLimitBytes {
		return nil
	}

	return fmt.Errorf("invalid TalosProxmoxCluster inputs: helmCharts: the bootstrap manifests (%s) come to %s, carried "+
		"by each of the %d control planes' machine configurations: %s in Pulumi state, over the %s limit; keep "+
		"only what the cluster needs to boot (the CNI, perhaps a GitOps controller) and install the rest after "+
		"bootstrap", parts, size(total), len(c.ControlPlanes()), size(stateBytes(c, total)), size(manifestsLimitBytes))
}

func manifestBudgetWarning(c *spec.Cluster, rendered []*helmrender.Manifest) string {
	total, parts := manifestSizes(c, rendered)
	if stateBytes(c, total) <= manifestsWarnBytes {
		return ""
	}

	return fmt.Sprintf("helmCharts: the bootstrap manifests (%s) come to %s, carried by each of the %d control "+
		"planes' machine configurations: %s in Pulumi state. Consider installing large charts after bootstrap "+
		"(above %s the component refuses)", parts, size(total), len(c.ControlPlanes()), size(stateBytes(c, total)),
		size(manifestsLimitBytes))
}

func size(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
