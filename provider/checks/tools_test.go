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

// TestInstalledPulumiIsUsed: a user who has Pulumi (as its installers lay it out: the CLI with
// its language hosts beside it) skips its 8–12-minute build when it is the pinned version or a
// newer v3, named by $PULUMI or found on PATH; anything else falls back to building the pinned
// one into the cache.
func TestInstalledPulumiIsUsed(t *testing.T) {
	t.Parallel()

	root := t.TempDir()
	newer, older, v4 := filepath.Join(root, "newer"), filepath.Join(root, "older"), filepath.Join(root, "v4")
	noYAML, linked := filepath.Join(root, "no-yaml"), filepath.Join(root, "usr-local-bin")

	fakePulumi(t, newer, "v3.999.1")
	fakePulumi(t, older, "v3.1.0")
	fakePulumi(t, v4, "v4.0.0")
	fakePulumi(t, noYAML, "v3.999.1", "yaml")

	if err := os.MkdirAll(linked, 0o755); err != nil {
		t.Fatal(err)
	}

	if err := os.Symlink(filepath.Join(newer, "pulumi"), filepath.Join(linked, "pulumi")); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		env  []string
		want string // the bin dir printed; "" for the cache's
	}{
		{name: "PULUMI names a newer v3", env: []string{"PULUMI=" + filepath.Join(newer, "pulumi")}, want: newer},
		{name: "pulumi on PATH", env: []string{"PATH=" + newer + ":/usr/bin:/bin"}, want: newer},
		{name: "a symlink on PATH, the hosts beside its target", env: []string{"PATH=" + linked + ":/usr/bin:/bin"}, want: newer},
		{name: "PULUMI wins over PATH", env: []string{"PULUMI=" + filepath.Join(newer, "pulumi"), "PATH=" + older + ":/usr/bin:/bin"}, want: newer},
		{name: "older than the pinned one", env: []string{"PULUMI=" + filepath.Join(older, "pulumi")}},
		{name: "another major version", env: []string{"PATH=" + v4 + ":/usr/bin:/bin"}},
		{name: "a language host missing", env: []string{"PULUMI=" + filepath.Join(noYAML, "pulumi")}},
		{name: "PULUMI not a file", env: []string{"PULUMI=" + filepath.Join(root, "nothing")}},
		{name: "building asked for", env: []string{"PULUMI=" + filepath.Join(newer, "pulumi"), "TALOS_PROXMOX_BUILD_PULUMI=1"}},
		{name: "none installed"},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()

			cache := t.TempDir()
			got, stderr, ok := script(t, "tools/toolchain/build.sh", append(c.env, "TALOS_PROXMOX_TOOLCHAIN_DIR="+cache)...)
			if !ok {
				t.Fatalf("build.sh --print-dir failed: %s", stderr)
			}

			want := c.want
			if want == "" && !strings.HasPrefix(got, cache+"/pulumi-v3.") {
				t.Errorf("bin dir %q, want the pinned build's in the cache %s", got, cache)
			} else if c.want != "" && got != want {
				t.Errorf("bin dir %q, want the installed %q", got, want)
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

	mod, err := os.ReadFile("../../tools/kube/go.mod")
	if err != nil {
		t.Fatal(err)
	}

	var pinned string

	for line := range strings.Lines(string(mod)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" && strings.HasPrefix(f[1], "v1.") {
			pinned = f[1]
		}
	}

	if pinned == "" {
		t.Fatal("tools/kube/go.mod requires no k8s.io/kubernetes")
	}

	root := t.TempDir()
	upstream, ours, old, lonely := filepath.Join(root, "upstream"), filepath.Join(root, "ours"), filepath.Join(root, "old"), filepath.Join(root, "lonely")

	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		fakeBin(t, upstream, c, "Kubernetes "+pinned)
		fakeBin(t, old, c, "Kubernetes v1.30.0")
	}

	fakeBin(t, ours, "kube", "Kubernetes "+pinned)
	fakeBin(t, lonely, "kube-apiserver", "Kubernetes "+pinned)

	cases := []struct {
		bin, want, refusal string
	}{
		{bin: filepath.Join(upstream, "kube-apiserver"), want: upstream},
		{bin: filepath.Join(ours, "kube"), want: ours},
		{bin: filepath.Join(old, "kube-apiserver"), refusal: "the lab needs Kubernetes " + pinned},
		{bin: filepath.Join(lonely, "kube-apiserver"), refusal: "kube-controller-manager, which is not beside it"},
		{bin: filepath.Join(root, "nothing"), refusal: "is not an executable file"},
	}

	for _, c := range cases {
		got, stderr, ok := script(t, "tools/kube/build.sh", "TALOS_KUBE_BIN="+c.bin)

		switch {
		case c.refusal == "" && (!ok || got != c.want):
			t.Errorf("TALOS_KUBE_BIN=%s: bin dir %q (ok %v, %s), want %q", c.bin, got, ok, stderr, c.want)
		case c.refusal != "" && (ok || !strings.Contains(stderr, "TALOS_KUBE_BIN="+c.bin) || !strings.Contains(stderr, c.refusal)):
			t.Errorf("TALOS_KUBE_BIN=%s: ok %v, stderr %q; want a refusal naming it and %q", c.bin, ok, stderr, c.refusal)
		}
	}
}
