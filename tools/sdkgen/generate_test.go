package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The repository's schema and checked-in SDKs, relative to this directory.
const (
	repoSchema = "../../schema.json"
	repoSDK    = "../../sdk"
)

// generateRepoSchema generates the SDKs of the repository's schema.json.
func generateRepoSchema(t *testing.T) map[string][]byte {
	t.Helper()
	spec, err := os.ReadFile(repoSchema)
	if err != nil {
		t.Fatal(err)
	}
	files, warnings, err := generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		t.Logf("warning: %s", w)
	}
	return files
}

func TestCheckedInSDKIsCurrent(t *testing.T) {
	diffs, err := diffTree(repoSDK, generateRepoSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Errorf("%s: %s", d.kind, d.path)
	}
	if len(diffs) > 0 {
		t.Log("sdk/ is stale: regenerate it with `go run . -schema ../../schema.json -out ../../sdk` here")
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	first := generateRepoSchema(t)
	for range 3 {
		again := generateRepoSchema(t)
		if len(again) != len(first) {
			t.Fatalf("generated %d files, then %d", len(first), len(again))
		}
		for name, content := range first {
			if !bytes.Equal(again[name], content) {
				t.Errorf("%s differs between two runs", name)
			}
		}
	}
}

func TestGenerateLayout(t *testing.T) {
	files := generateRepoSchema(t)
	for _, name := range []string{
		"go/go.mod",
		"go/go.sum",
		"go/talosproxmox/talosProxmoxCluster.go",
		"nodejs/package.json",
		"nodejs/talosProxmoxCluster.ts",
		"python/pyproject.toml",
		"python/README.md",
		"python/pulumi_talos_proxmox/talos_proxmox_cluster.py",
	} {
		if _, ok := files[name]; !ok {
			t.Errorf("%s was not generated", name)
		}
	}
	if got := modfile.ModulePath(files["go/go.mod"]); got != "github.com/talos-proxmox/pulumi-talos-proxmox/sdk/go" {
		t.Errorf("Go SDK module %q", got)
	}
	for _, want := range []string{`"@pulumi/pulumi": "^` + pulumiSDKVersion + `"`, `"typescript": "` + typescriptVersion + `"`} {
		if !bytes.Contains(files["nodejs/package.json"], []byte(want)) {
			t.Errorf("nodejs/package.json lacks %s", want)
		}
	}
	if want := `"pulumi>=` + pulumiSDKVersion + `,<4.0.0"`; !bytes.Contains(files["python/pyproject.toml"], []byte(want)) {
		t.Errorf("python/pyproject.toml lacks %s", want)
	}
}

func TestGeneratedFilesHoldNoMachinePaths(t *testing.T) {
	repoRoot, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	machinePaths := []string{repoRoot + string(filepath.Separator)}
	if home, err := os.UserHomeDir(); err == nil {
		machinePaths = append(machinePaths, home+string(filepath.Separator))
	}
	for name, content := range generateRepoSchema(t) {
		for _, p := range machinePaths {
			if bytes.Contains(content, []byte(p)) {
				t.Errorf("%s contains the machine path %s", name, p)
			}
		}
	}
}

func TestPulumiVersionsAgree(t *testing.T) {
	want := "v" + pulumiSDKVersion
	for file, modules := range map[string][]string{
		"go.mod":     {"github.com/pulumi/pulumi/pkg/v3", "github.com/pulumi/pulumi/sdk/v3"},
		"sdk-go.mod": {"github.com/pulumi/pulumi/sdk/v3"},
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		mod, err := modfile.Parse(file, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range modules {
			found := false
			for _, r := range mod.Require {
				if r.Mod.Path == path {
					found = true
					if r.Mod.Version != want {
						t.Errorf("%s requires %s %s, pins.go says %s", file, path, r.Mod.Version, want)
					}
				}
			}
			if !found {
				t.Errorf("%s does not require %s", file, path)
			}
		}
	}
}

func TestPinLanguagesRejectsConflicts(t *testing.T) {
	spec := []byte(`{"name": "p", "version": "1.0.0", "language": {"nodejs": {"dependencies": {"@pulumi/pulumi": "3.0.0"}}}}`)
	_, _, err := generate(spec)
	if err == nil || !strings.Contains(err.Error(), "language.nodejs.dependencies.@pulumi/pulumi") {
		t.Fatalf("error %v, want one naming the conflicting setting", err)
	}
}
