package provider

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestReleaseVersionWinsOverVersionFile: a binary linked by `make release` (-X …releaseVersion)
// reports the release's version; a development build reports provider/VERSION.
func TestReleaseVersionWinsOverVersionFile(t *testing.T) {
	t.Parallel()

	if got := pickVersion("0.2.0-rc.1", "0.1.0\n"); got != "0.2.0-rc.1" {
		t.Errorf("release build reports %q", got)
	}

	if got := pickVersion("", "0.1.0\n"); got != "0.1.0" {
		t.Errorf("development build reports %q", got)
	}
}

// TestSchemaTellsWhereToDownloadThePlugin: the schema (so every SDK) names the GitHub releases of
// the repository it declares, where `make release`'s archives are published.
func TestSchemaTellsWhereToDownloadThePlugin(t *testing.T) {
	t.Parallel()

	raw, err := Schema(t.Context())
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
