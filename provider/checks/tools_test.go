package checks

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBin writes an executable shell script name into dir that prints out.
func fakeBin(t *testing.T, dir, name, out string) {
	t.Helper()

	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	script := "#!/bin/sh\necho '" + out + "'\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// fakePulumi installs a Pulumi of version v into dir with the language hosts the tests run,
// leaving out the ones named in without.
func fakePulumi(t *testing.T, dir, v string, without ...string) {
	t.Helper()
	fakeBin(t, dir, "pulumi", v)

	for _, h := range []string{"yaml", "go", "nodejs", "python", "python-exec"} {
		if !strings.Contains(strings.Join(without, " "), h) {
			fakeBin(t, dir, "pulumi-language-"+h, "")
		}
	}
}

// script runs a tools/*/build.sh with only env (and a PATH without any installed tool besides
// the shell's) and returns its stdout, its stderr and whether it succeeded.
func script(t *testing.T, path string, env ...string) (string, string, bool) {
	t.Helper()

	cmd := exec.Command(filepath.Join("..", "..", path), "--print-dir")
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "XDG_CACHE_HOME=" + t.TempDir()}, env...)

	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()

	return strings.TrimSpace(stdout.String()), stderr.String(), err == nil
}

// pinnedIn reads the version go.mod (relative to the repository root) requires of module.
func pinnedIn(t *testing.T, gomod, module string) string {
	t.Helper()

	raw, err := os.ReadFile(filepath.Join("..", "..", gomod))
	if err != nil {
		t.Fatal(err)
	}

	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "require" {
			f = f[1:] // a one-line require
		}

		if len(f) >= 2 && f[0] == module && strings.HasPrefix(f[1], "v") {
			return f[1]
		}
	}

	t.Fatalf("%s requires no %s", gomod, module)

	return ""
}

// resolved is path with every symlink followed (a temporary directory may be under one).
func resolved(t *testing.T, path string) string {
	t.Helper()

	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}

	return p
}

// TestInstalledPulumiIsUsed: a user who has Pulumi (as its installers lay it out: the CLI with
// its language hosts beside it) skips its 8-minute build when it is the pinned version or a
// newer v3, named by $PULUMI or found on PATH. The bin dir given to the tests holds links to the
// CLI and its hosts only (they go first on PATH). A pulumi on PATH that does not qualify falls
// back to building the pinned one into the cache; a PULUMI the user set that does not qualify is
// refused, saying why.
func TestInstalledPulumiIsUsed(t *testing.T) {
	t.Parallel()

	pinned := pinnedIn(t, "tools/toolchain/pulumi/go.mod", "github.com/pulumi/pulumi/pkg/v3")
	root := t.TempDir()
	dirs := map[string]string{}

	for name, v := range map[string]string{
		"newer": "v3.999.1", "newer-pre": "v3.999.1-alpha.1", "older": "v3.1.0", "v4": "v4.0.0",
		"pinned": pinned, "pinned-pre": pinned + "-alpha.1", "no-yaml": "v3.999.1",
	} {
		dirs[name] = filepath.Join(root, name)
		if name == "no-yaml" {
			fakePulumi(t, dirs[name], v, "yaml")
		} else {
			fakePulumi(t, dirs[name], v)
		}
	}

	linked := filepath.Join(root, "usr-local-bin")
	if err := os.MkdirAll(linked, 0o755); err != nil {
		t.Fatal(err)
	}

	if err := os.Symlink(filepath.Join(dirs["newer"], "pulumi"), filepath.Join(linked, "pulumi")); err != nil {
		t.Fatal(err)
	}

	path := func(dir string) string { return "PATH=" + dir + ":/usr/bin:/bin" }
	cli := func(name string) string { return "PULUMI=" + filepath.Join(dirs[name], "pulumi") }

	cases := []struct {
		name    string
		env     []string
		want    string // the installation used; "" for the pinned build in the cache
		refusal string // set: build.sh fails saying this
	}{
		{name: "PULUMI names a newer v3", env: []string{cli("newer")}, want: "newer"},
		{name: "PULUMI names the pinned version", env: []string{cli("pinned")}, want: "pinned"},
		{name: "a pre-release of a newer version", env: []string{path(dirs["newer-pre"])}, want: "newer-pre"},
		{name: "pulumi on PATH", env: []string{path(dirs["newer"])}, want: "newer"},
		{name: "a symlink on PATH, the hosts beside its target", env: []string{path(linked)}, want: "newer"},
		{name: "PULUMI wins over PATH", env: []string{cli("newer"), path(dirs["older"])}, want: "newer"},
		{name: "on PATH, older than the pinned one", env: []string{path(dirs["older"])}},
		{name: "on PATH, a pre-release of the pinned one", env: []string{path(dirs["pinned-pre"])}},
		{name: "on PATH, another major version", env: []string{path(dirs["v4"])}},
		{name: "on PATH, a language host missing", env: []string{path(dirs["no-yaml"])}},
		{name: "PULUMI older than the pinned one", env: []string{cli("older")}, refusal: "older than the pinned " + pinned},
		{name: "PULUMI without a language host", env: []string{cli("no-yaml")}, refusal: "has no pulumi-language-yaml beside it"},
		{name: "PULUMI not a file", env: []string{"PULUMI=" + filepath.Join(root, "nothing")}, refusal: "is not an executable file"},
		{name: "building asked for", env: []string{cli("newer"), "TALOS_PROXMOX_BUILD_PULUMI=1"}},
		{name: "none installed"},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()

			cache := t.TempDir()
			got, stderr, ok := script(t, "tools/toolchain/build.sh", append(c.env, "TALOS_PROXMOX_TOOLCHAIN_DIR="+cache)...)

			switch {
			case c.refusal != "":
				if ok || !strings.Contains(stderr, c.refusal) || !strings.Contains(stderr, "unset PULUMI") {
					t.Errorf("ok %v, stderr %q; want a refusal saying %q and how to build instead", ok, stderr, c.refusal)
				}
			case !ok:
				t.Fatalf("build.sh --print-dir failed: %s", stderr)
			case c.want == "":
				if !strings.HasPrefix(got, cache+"/pulumi-"+pinned+"-") {
					t.Errorf("bin dir %q, want the pinned build's in the cache %s", got, cache)
				}
			default:
				if !strings.HasPrefix(got, cache+"/installed-") {
					t.Fatalf("bin dir %q, want a directory of links in the cache %s", got, cache)
				}

				entries, err := os.ReadDir(got)
				if err != nil {
					t.Fatal(err)
				}

				if len(entries) != 6 {
					t.Errorf("bin dir holds %d entries, want the CLI and its 5 hosts only", len(entries))
				}

				for _, e := range entries {
					if want := filepath.Join(dirs[c.want], e.Name()); resolved(t, filepath.Join(got, e.Name())) != resolved(t, want) {
						t.Errorf("%s links to %s, want %s", e.Name(), resolved(t, filepath.Join(got, e.Name())), want)
					}
				}
			}
		})
	}
}

// TestGivenKubernetesIsUsed: TALOS_KUBE_BIN names a control plane of the pinned version (this
// repository's kube binary, or an upstream kube-apiserver with its two siblings), which is used
// as it is; any other version, or a missing sibling, is refused naming the variable, rather than
// running the lab against a Kubernetes its tests were not written for.
func TestGivenKubernetesIsUsed(t *testing.T) {
	t.Parallel()

	pinned := pinnedIn(t, "tools/kube/go.mod", "k8s.io/kubernetes")

	root := t.TempDir()
	upstream, ours, old, lonely := filepath.Join(root, "upstream"), filepath.Join(root, "ours"), filepath.Join(root, "old"), filepath.Join(root, "lonely")

	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		fakeBin(t, upstream, c, "Kubernetes "+pinned)
		fakeBin(t, old, c, "Kubernetes v1.30.0")
	}

	fakeBin(t, ours, "kube", "Kubernetes "+pinned)
	fakeBin(t, lonely, "kube-apiserver", "Kubernetes "+pinned)

	// Upstream binaries of two versions, and an older pin's build in the cache itself.
	mixed := filepath.Join(root, "mixed")
	fakeBin(t, mixed, "kube-apiserver", "Kubernetes "+pinned)
	fakeBin(t, mixed, "kube-controller-manager", "Kubernetes "+pinned)
	fakeBin(t, mixed, "kube-scheduler", "Kubernetes v1.30.0")

	cache := filepath.Join(root, "cache")
	oldKey := filepath.Join(cache, "kubernetes-v1.30.0-linux-x86_64-000000000000", "bin")
	fakeBin(t, oldKey, "kube", "Kubernetes v1.30.0")

	cases := []struct {
		bin, want, refusal string
	}{
		{bin: filepath.Join(upstream, "kube-apiserver"), want: upstream},
		{bin: filepath.Join(ours, "kube"), want: ours},
		{bin: filepath.Join(old, "kube-apiserver"), refusal: "the lab needs Kubernetes " + pinned},
		{bin: filepath.Join(lonely, "kube-apiserver"), refusal: "kube-controller-manager, which is not beside it"},
		{bin: filepath.Join(root, "nothing"), refusal: "is not an executable file"},
		{bin: filepath.Join(mixed, "kube-apiserver"), refusal: "kube-scheduler reports 'v1.30.0'"},
		{bin: filepath.Join(oldKey, "kube"), refusal: "the lab needs Kubernetes " + pinned},
	}

	for _, c := range cases {
		got, stderr, ok := script(t, "tools/kube/build.sh", "TALOS_KUBE_BIN="+c.bin, "TALOS_PROXMOX_KUBE_DIR="+cache)

		switch {
		case c.refusal == "" && (!ok || got != c.want):
			t.Errorf("TALOS_KUBE_BIN=%s: bin dir %q (ok %v, %s), want %q", c.bin, got, ok, stderr, c.want)
		case c.refusal != "" && (ok || !strings.Contains(stderr, "TALOS_KUBE_BIN="+c.bin) || !strings.Contains(stderr, c.refusal)):
			t.Errorf("TALOS_KUBE_BIN=%s: ok %v, stderr %q; want a refusal naming it and %q", c.bin, ok, stderr, c.refusal)
		}
	}
}
