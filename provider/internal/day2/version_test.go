package day2

import (
	"strings"
	"testing"
)

func TestCheckUpgradePath(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		from, to  string
		downgrade bool
		wantErr   string // "" = allowed
	}{
		{"v1.11.5", "v1.11.6", false, ""},
		{"v1.10.8", "v1.11.5", false, ""},
		{"v1.11.5", "v1.12.0", false, ""},
		{"v1.11.5", "v1.13.0", false, ""},
		{"v1.10.8", "v1.13.0", false, "too old"},
		{"v1.12.0", "v1.14.1", false, ""},
		{"v1.11.5", "v1.14.1", false, "too old"},
		{"v1.11.6", "v1.11.5", false, "upgrade.allowDowngrade"},
		{"v1.11.6", "v1.11.5", true, ""},
		{"v1.11.5", "latest", false, "not a Talos version"},
		{"v1.11.5", "v1.99.0", false, "not supported"},
	} {
		err := CheckUpgradePath(tc.from, tc.to, tc.downgrade)

		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s → %s: %v, want allowed", tc.from, tc.to, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s → %s: %v, want an error with %q", tc.from, tc.to, err, tc.wantErr)
		}
	}
}

func TestHasLifecycleAPI(t *testing.T) {
	t.Parallel()

	for v, want := range map[string]bool{
		"v1.11.5": false, "v1.12.4": false, "v1.13.0-alpha.2": false, "v1.13.0-alpha.3": true, "v1.13.0": true, "v1.14.1": true, "junk": false,
	} {
		if got := HasLifecycleAPI(v); got != want {
			t.Errorf("HasLifecycleAPI(%s) = %v, want %v", v, got, want)
		}
	}
}

func TestCheckKubernetesStep(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct{ from, to, wantErr string }{
		{"", "v1.34.1", ""},
		{"v1.33.5", "v1.33.6", ""},
		{"v1.33.5", "v1.34.1", ""},
		{"v1.33.5", "v1.33.1", ""},
		{"v1.32.3", "v1.34.1", "skips v1.33"},
		{"v1.34.1", "v1.33.5", "goes back a minor"},
	} {
		err := CheckKubernetesStep(tc.from, tc.to)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s → %s: %v, want %q", tc.from, tc.to, err, tc.wantErr)
		}
	}
}
