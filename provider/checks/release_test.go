package checks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider"
)

// TestSchemaTellsWhereToDownloadThePlugin: the schema (so every SDK) names the GitHub releases of
// the repository it declares, where `make release`'s archives are published.
func TestSchemaTellsWhereToDownloadThePlugin(t *testing.T) {
	t.Parallel()

	raw, err := provider.Schema(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	var s struct {
		Repository, Homepage, Publisher, PluginDownloadURL string
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}

	ownerRepo := strings.TrimPrefix(s.Repository, "https://github.com/")
	if ownerRepo == s.Repository || s.PluginDownloadURL != "github://api.github.com/"+ownerRepo {
		t.Errorf("pluginDownloadURL %q does not name the releases of repository %q", s.PluginDownloadURL, s.Repository)
	}

	if s.Homepage == "" || s.Publisher == "" {
		t.Errorf("schema lacks homepage or publisher: %+v", s)
	}
}
