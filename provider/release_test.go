package provider

import "testing"

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
