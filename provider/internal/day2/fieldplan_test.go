package day2

import (
	"slices"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/redact"
)

func TestDiffFieldsNamesChangedPathsAndHidesSecretData(t *testing.T) {
	t.Parallel()

	live := map[string]any{
		"metadata": map[string]any{"name": "a", "resourceVersion": "1", "managedFields": []any{"x"}},
		"data":     map[string]any{"mode": "fast", "gone": "1", "token": "c2VjcmV0"},
		"status":   map[string]any{"phase": "x"},
	}
	applied := map[string]any{
		"metadata": map[string]any{"name": "a", "resourceVersion": "2", "managedFields": []any{"y"}},
		"data":     map[string]any{"mode": "slow", "token": "b3RoZXI=", "new": map[string]any{"deep": true}},
		"status":   map[string]any{"phase": "y"},
	}

	var configMap, secret []string

	diffFields(live, applied, "", false, &configMap)
	diffFields(live, applied, "", true, &secret)

	want := []string{`.data.gone: "1" → (none)`, `.data.mode: "fast" → "slow"`, `.data.new: (none) → …`, `.data.token: "c2VjcmV0" → "b3RoZXI="`}
	if !slices.Equal(configMap, want) {
		t.Errorf("a ConfigMap's changes: %q, want %q", configMap, want)
	}

	if got := secret[3]; got != ".data.token: "+redact.Fingerprint("c2VjcmV0")+" → "+redact.Fingerprint("b3RoZXI=") {
		t.Errorf("a Secret's changed value shows as %q", got)
	}
}
