package helmrender

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}

	return strings.Join(lines, "\n")
}

// sameRender is the determinism gate: two renders of the same inputs must be byte-identical.
func sameRender(rel Release, a, b *Manifest) error {
	if a.Contents == b.Contents {
		return nil
	}

	da, db := objectTexts(a), objectTexts(b)

	var differ []string

	for _, k := range slices.Sorted(maps.Keys(da)) {
		if db[k] != da[k] {
			differ = append(differ, k)
		}
	}

	for _, k := range slices.Sorted(maps.Keys(db)) {
		if _, ok := da[k]; !ok {
			differ = append(differ, k)
		}
	}

	hint := rel.Hint
	if hint == "" {
		hint = "set values so the chart does not generate them (provide the certificates or passwords yourself, " +
			"or turn the feature off)"
	}

	return fmt.Errorf("%s: chart %s %s renders differently every time (%s differ): it generates random "+
		"values such as certificates or passwords, which would change the machine configuration on every "+
		"`pulumi up`; %s", rel.Path, a.Chart, a.ChartVersion, list(differ, 10), hint)
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
