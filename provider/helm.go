package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// renderHelm renders the cluster's Helm releases (Cilium first) at plan time, from plain
// inputs, so preview shows real changes. It returns one inline manifest `helm-<release>` per
// release, and warnings.
func renderHelm(ctx context.Context, c *spec.Cluster) ([]*helmrender.Manifest, []string, error) {
	var rendered []*helmrender.Manifest

	if len(c.HelmReleases) > 0 {
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

		if rendered, err = r.RenderAll(ctx, rels); err != nil {
			return nil, nil, fmt.Errorf("invalid TalosProxmoxCluster inputs: %w", err)
		}
	}

	inline := 0
	for _, m := range c.InlineManifests {
		inline += len(m.Contents.Text) // unknown at preview: counted at up
	}

	warning, err := helmrender.CheckBudget(rendered, inline, len(c.ControlPlanes()))
	if err != nil {
		return nil, nil, fmt.Errorf("invalid TalosProxmoxCluster inputs: %w", err)
	}

	var warnings []string
	if warning != "" {
		warnings = append(warnings, warning)
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
