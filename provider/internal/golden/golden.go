// Package golden compares test output with files under testdata/, rewriting them when the test
// binary runs with -update.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Check compares got with testdata/<name>, or writes it there with -update.
func Check(t *testing.T, name, got string) {
	t.Helper()

	file := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}

		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}

		return
	}

	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}

	if string(want) != got {
		t.Fatalf("%s differs from what the test produced (run go test -update if the change is intended)\n--- got\n%s", file, got)
	}
}
