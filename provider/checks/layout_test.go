package checks

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoFilesStaySmall is a guard against monsters, not a size to pack to: no hand-written Go
// file of the repository reaches 600 lines, so each can still be read in one sitting. Files are
// split by concern, and a type keeps its methods with it. Generated SDKs are exempt.
func TestGoFilesStaySmall(t *testing.T) {
	t.Parallel()

	const limit = 600

	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
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
			t.Errorf("%s has %d lines; split it by concern (a type keeps its methods) below %d", path, n, limit)
		}

		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
