package helmrender

import (
	"fmt"
	"strings"
)

// Size budget of the bootstrap manifests, counted once per control plane: every control plane's
// machine configuration carries them, and Pulumi state stores each configuration.
const (
	BudgetWarnBytes  = 1 << 20
	BudgetLimitBytes = 4 << 20
)

// CheckBudget weighs the rendered releases plus inlineBytes of other inline manifests, carried by
// each of controlPlanes configurations. Above BudgetLimitBytes it returns an error, above
// BudgetWarnBytes a warning; both list each chart's size.
func CheckBudget(rendered []*Manifest, inlineBytes, controlPlanes int) (string, error) {
	total := inlineBytes

	var parts []string

	for _, m := range rendered {
		total += len(m.Contents)
		parts = append(parts, fmt.Sprintf("%s %s %s", m.Chart, m.ChartVersion, size(len(m.Contents))))
	}

	if inlineBytes > 0 {
		parts = append(parts, "inlineManifests "+size(inlineBytes))
	}

	cps := max(1, controlPlanes)
	state := total * cps
	carried := fmt.Sprintf("the bootstrap manifests (%s) come to %s, carried by each of the %d control planes' "+
		"machine configurations: %s in Pulumi state", strings.Join(parts, ", "), size(total), cps, size(state))

	switch {
	case state > BudgetLimitBytes:
		return "", fmt.Errorf("helmCharts: %s, over the %s limit; keep only what the cluster needs to boot (the "+
			"CNI, perhaps a GitOps controller) and install the rest after bootstrap", carried, size(BudgetLimitBytes))
	case state > BudgetWarnBytes:
		return fmt.Sprintf("helmCharts: %s. Consider installing large charts after bootstrap (above %s the "+
			"component refuses)", carried, size(BudgetLimitBytes)), nil
	default:
		return "", nil
	}
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
