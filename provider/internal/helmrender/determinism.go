package helmrender

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
)

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}

	return strings.Join(lines, "\n")
}

// gatePass is the determinism gate's second render: the output of the templates that can vary
// (all of them when the chart could not be analysed: varies is nil), by template file.
type gatePass struct {
	varies map[string]bool
	output map[string]string
	passes int64
	err    error
}

// renderAgain is the gate's second render: of the templates that can vary only, with what they
// need. Should that smaller render fail, the whole chart is rendered again instead, so a fault in
// the analysis costs time, never a wrong answer. The values are not checked against the schema:
// the first render does that.
func renderAgain(ctx context.Context, load func() (*chart.Chart, error), rel Release,
	kv *chartutil.KubeVersion,
) gatePass {
	c, err := load()
	if err != nil {
		return gatePass{err: err}
	}

	varies, needed, ok := varyingTemplates(c)
	if ok && len(varies) == 0 {
		return gatePass{varies: varies}
	}

	var passes int64

	if ok {
		passes++

		if out, err := install(ctx, withTemplates(c, needed), rel, kv, nil); err == nil {
			return gatePass{varies: varies, output: bySource(out), passes: passes}
		}

		// Helm may have changed what the smaller chart shares with c (a chart with dependencies):
		// render a fresh copy.
		if c, err = load(); err != nil {
			return gatePass{err: err, passes: passes}
		}
	}

	out, err := install(ctx, c, rel, kv, nil)
	if err != nil {
		return gatePass{err: err, passes: passes + 1}
	}

	return gatePass{output: bySource(out), passes: passes + 1}
}

// bySource is a render's output by the template file each document came from (Helm's `# Source:`
// lines), test hooks left out. A file's documents keep Helm's order, which depends on that file
// alone.
func bySource(out *release.Release) map[string]string {
	m := map[string]string{}

	for _, doc := range strings.Split(out.Manifest, "---\n# Source: ") {
		name, text, _ := strings.Cut(doc, "\n")
		m[name] += text + "\n---\n"
	}

	for _, h := range out.Hooks {
		if !isTestHook(h) {
			m[h.Path] += h.Manifest + "\n---\n"
		}
	}

	return m
}

// check is the determinism gate: each template that can vary must have rendered the same bytes
// both times. The error names the objects that differ, or the files when they are not valid
// objects.
func (g gatePass) check(rel Release, ch *chart.Chart, first map[string]string) error {
	names := slices.Collect(maps.Keys(g.varies))
	if g.varies == nil {
		names = slices.Collect(maps.Keys(first))
		for n := range g.output {
			if _, ok := first[n]; !ok {
				names = append(names, n)
			}
		}
	}

	slices.Sort(names)

	var a, b []string

	for _, n := range names {
		if first[n] != g.output[n] {
			a, b = append(a, first[n]), append(b, g.output[n])
		}
	}

	if len(a) == 0 {
		return nil
	}

	differ := differingObjects(strings.Join(a, "\n---\n"), strings.Join(b, "\n---\n"), rel.Namespace)
	if differ == nil {
		for _, n := range names {
			if first[n] != g.output[n] {
				differ = append(differ, n)
			}
		}
	}

	hint := rel.Hint
	if hint == "" {
		hint = "set values so the chart does not generate them (provide the certificates or passwords yourself, " +
			"or turn the feature off)"
	}

	return fmt.Errorf("%s: chart %s %s renders differently every time (%s differ): it generates random "+
		"values such as certificates or passwords, which would change the machine configuration on every "+
		"`pulumi up`; %s", rel.Path, ch.Metadata.Name, ch.Metadata.Version, list(differ, 10), hint)
}

// differingObjects names the objects of two renders that differ; nil when either is not valid.
func differingObjects(x, y, namespace string) []string {
	mx, err := Normalise(x, namespace)
	if err != nil {
		return nil
	}

	my, err := Normalise(y, namespace)
	if err != nil {
		return nil
	}

	dx, dy := objectTexts(mx), objectTexts(my)

	var differ []string

	for _, k := range slices.Sorted(maps.Keys(dx)) {
		if dy[k] != dx[k] {
			differ = append(differ, k)
		}
	}

	for _, k := range slices.Sorted(maps.Keys(dy)) {
		if _, ok := dx[k]; !ok {
			differ = append(differ, k)
		}
	}

	return differ
}

func objectTexts(m *Manifest) map[string]string {
	out := map[string]string{}

	docs := splitDocuments(m.Contents)
	for i, o := range m.Objects {
		if i < len(docs) {
			out[o.String()] += docs[i]
		}
	}

	return out
}
