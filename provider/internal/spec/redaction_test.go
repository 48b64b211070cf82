package spec

import (
	"strings"
	"testing"
)

// An inline manifest may be a secret: its error says where the YAML breaks, never what it holds.
func TestManifestErrorsDoNotQuoteContents(t *testing.T) {
	t.Parallel()

	for _, text := range []string{
		"hunter2-secret-value\n",
		"apiVersion: v1\nkind: Secret\nstringData: {password: hunter2-secret-value\n",
		"- hunter2-secret-value\n",
	} {
		why := checkManifestYAML(text)
		if why == "" {
			t.Errorf("%q accepted", text)
			continue
		}

		if strings.Contains(why, "hunter2") {
			t.Errorf("the error quotes the manifest: %s", why)
		}
	}
}
