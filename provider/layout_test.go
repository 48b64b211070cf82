package provider

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoFilesStaySmall keeps every hand-written Go file of the repository under 400 lines, so
// each can be read in one sitting (split by concern, not by line count). Generated SDKs are
// exempt.
func TestGoFilesStaySmall(t *testing.T) {
	t.Parallel()

	const limit = 400

	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}

		if d.IsDir() {
			switch d.Name() {
			case "sdk", "node_modules", ".cache", ".git", "bin":
				return filepath.SkipDir
			}

			return nil
		}

		if !strings.HasSuffix(path, ".go") {
			return nil
		}

		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}

		if n := strings.Count(string(data), "\n"); n >= limit {
			t.Errorf("%s has %d lines; split it by concern below %d", path, n, limit)
		}

		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
