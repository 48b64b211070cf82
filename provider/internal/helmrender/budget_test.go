package helmrender_test

import (
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
)

func TestBudget(t *testing.T) {
	t.Parallel()

	rendered := func(kib int) []*helmrender.Manifest {
		return []*helmrender.Manifest{{Chart: "cert-manager", ChartVersion: "v1.21.2", Contents: strings.Repeat("x", kib<<10)}}
	}

	// 3 × 300 KiB = 900 KiB in state: fine.
	if w, err := helmrender.CheckBudget(rendered(300), 0, 3); w != "" || err != nil {
		t.Errorf("under the budget: %q, %v", w, err)
	}

	// 3 × 400 KiB + inline: a warning naming the chart, its size and the state total.
	w, err := helmrender.CheckBudget(rendered(400), 2048, 3)
	if err != nil {
		t.Errorf("error under the limit: %v", err)
	}

	for _, want := range []string{"cert-manager v1.21.2 400 KiB", "inlineManifests 2 KiB", "3 control planes", "1.2 MiB in Pulumi state"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}

	// Inline manifests alone count too.
	if w, _ := helmrender.CheckBudget(nil, 400<<10, 3); !strings.Contains(w, "inlineManifests 400 KiB") {
		t.Errorf("inline manifests alone: warning %q", w)
	}

	// 3 × 1.5 MiB = 4.5 MiB: refused; one control plane with the same charts is fine.
	_, err = helmrender.CheckBudget(rendered(1536), 0, 3)
	if err == nil || !strings.Contains(err.Error(), "cert-manager v1.21.2 1.5 MiB") || !strings.Contains(err.Error(), "4.5 MiB in Pulumi state, over the 4.0 MiB limit") {
		t.Errorf("error = %v", err)
	}

	if _, err := helmrender.CheckBudget(rendered(1536), 0, 1); err != nil {
		t.Errorf("one control plane: %v", err)
	}
}
