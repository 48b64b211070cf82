package helmrender

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
)

// RenderArchive renders a release from a fetched chart once, like
// `helm template <name> <chart> -n <namespace> --kube-version <v> --include-crds --skip-tests`:
// client-only, nothing remote (`lookup` returns nothing), test hooks dropped, other hooks kept as
// ordinary manifests after the others, NOTES dropped. The result is normalised (see Manifest).
func RenderArchive(ctx context.Context, a *Archive, rel Release, kubeVersion string) (*Manifest, error) {
	ch, second, kv, err := loadFor(a, rel, kubeVersion)
	if err != nil {
		return nil, err
	}

	out, err := install(ctx, ch, rel, kv, second)
	if err != nil {
		return nil, err
	}

	return manifestOf(out, a, rel, ch)
}

// loadFor loads a fetched chart for a release and checks it is the chart asked for. second loads
// a copy a concurrent render may use (the same chart when Helm will not change it).
func loadFor(a *Archive, rel Release, kubeVersion string) (*chart.Chart, func() (*chart.Chart, error),
	*chartutil.KubeVersion, error,
) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: Kubernetes version %q: %w", rel.Path, kubeVersion, err)
	}

	ch, second, err := a.loadTwice()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: chart %s is not a valid Helm chart: %w", rel.Path, rel.Source, err)
	}

	// A digest pin is looked up in the cache by content alone: make sure the archive is the chart
	// asked for.
	if !rel.Source.IsLocal() && ch.Metadata.Name != rel.Source.Chart {
		return nil, nil, nil, fmt.Errorf("%s: chart %s: the archive holds chart %q; check chart and digest",
			rel.Path, rel.Source, ch.Metadata.Name)
	}

	if v := rel.Source.Version; v != "" && strings.TrimPrefix(v, "v") != strings.TrimPrefix(ch.Metadata.Version, "v") {
		return nil, nil, nil, fmt.Errorf("%s: chart %s is version %s, not %s; check version", rel.Path, rel.Source,
			ch.Metadata.Version, v)
	}

	return ch, second, kv, nil
}

// install renders a chart as `helm template` does. validate, when not nil, loads the copy of the
// chart the values are checked against, beside the render.
func install(ctx context.Context, ch *chart.Chart, rel Release, kv *chartutil.KubeVersion,
	validate func() (*chart.Chart, error),
) (*release.Release, error) {
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun = true
	inst.DryRunOption = "client"
	inst.ClientOnly = true
	inst.Replace = true
	inst.IncludeCRDs = rel.IncludeCRDs
	inst.ReleaseName = rel.Name
	inst.Namespace = rel.Namespace
	inst.KubeVersion = kv

	// Helm validates the values against the chart's values.schema.json before rendering, and
	// compiling a large schema (Cilium's) costs as much as rendering. Validate beside the render
	// instead, on a copy of the chart; a validation error wins, exactly as if Helm had run it.
	inst.SkipSchemaValidation = true

	validated := make(chan error, 1)
	if validate != nil {
		go func() { validated <- validateValues(validate, rel.Values) }()
	} else {
		validated <- nil
	}

	out, err := inst.RunWithContext(ctx, ch, copyValues(rel.Values))
	if verr := <-validated; verr != nil {
		err = verr
	}

	if err != nil {
		return nil, fmt.Errorf("%s: rendering chart %s %s failed: %w; check values", rel.Path,
			ch.Metadata.Name, ch.Metadata.Version, err)
	}

	return out, nil
}

// manifestOf is a render's output as one normalised manifest: the manifests, then the hooks
// other than tests.
func manifestOf(out *release.Release, a *Archive, rel Release, ch *chart.Chart) (*Manifest, error) {
	docs := []string{out.Manifest}

	for _, h := range out.Hooks {
		if !isTestHook(h) {
			docs = append(docs, h.Manifest)
		}
	}

	m, err := Normalise(strings.Join(docs, "\n---\n"), rel.Namespace)
	if err != nil {
		return nil, fmt.Errorf("%s: chart %s %s rendered invalid YAML: %w", rel.Path, ch.Metadata.Name,
			ch.Metadata.Version, err)
	}

	m.Release = rel.Name
	m.Namespace = rel.Namespace
	m.Chart = ch.Metadata.Name
	m.ChartVersion = ch.Metadata.Version
	m.Digest = a.Digest

	return m, nil
}

// validateValues is Helm's schema check (chartutil.ToRenderValuesWithSchemaValidation): the
// values coalesced with the chart's defaults, against the schemas of the chart and its subcharts.
func validateValues(load func() (*chart.Chart, error), values map[string]any) error {
	ch, err := load()
	if err != nil {
		return err
	}

	vals, err := chartutil.CoalesceValues(ch, copyValues(values))
	if err != nil {
		return err
	}

	if err := chartutil.ValidateAgainstSchema(ch, vals); err != nil {
		return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s", err)
	}

	return nil
}

func isTestHook(h *release.Hook) bool {
	return slices.Contains(h.Events, release.HookTest)
}

// copyValues deep-copies values: Helm must not see (or change) the caller's maps.
func copyValues(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		out[k] = copyValue(x)
	}

	return out
}

func copyValue(x any) any {
	switch t := x.(type) {
	case map[string]any:
		return copyValues(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = copyValue(e)
		}

		return out
	default:
		return x
	}
}
