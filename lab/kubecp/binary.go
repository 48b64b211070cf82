package kubecp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Binary is the kube binary: $TALOS_KUBE_BIN if set (the Makefile sets it; a user may give an
// upstream release's kube-apiserver, with kube-controller-manager and kube-scheduler beside it),
// else the one tools/kube/build.sh has built into its cache for this source tree. It fails,
// saying how to build it, when there is none.
func Binary() (string, error) {
	if bin := os.Getenv("TALOS_KUBE_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("TALOS_KUBE_BIN=%s: %w (build it with `make kube`)", bin, err)
		}

		if Upstream(bin) {
			for _, c := range []string{"kube-controller-manager", "kube-scheduler"} {
				if _, err := os.Stat(filepath.Join(filepath.Dir(bin), c)); err != nil {
					return "", fmt.Errorf("TALOS_KUBE_BIN=%s is a kube-apiserver, and the lab also runs %s from the same directory: %w", bin, c, err)
				}
			}
		}

		return bin, nil
	}

	_, here, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("no kube binary: set TALOS_KUBE_BIN or build it with `make kube`")
	}

	script := filepath.Join(filepath.Dir(here), "..", "..", "tools", "kube", "build.sh")

	out, err := exec.Command(script, "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("%s --print-dir: %w (set TALOS_KUBE_BIN or build it with `make kube`)", script, err)
	}

	bin := filepath.Join(strings.TrimSpace(string(out)), "kube")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no kube binary at %s: build it with `make kube`", bin)
	}

	return bin, nil
}

// Upstream reports whether bin is an upstream release's kube-apiserver (one binary per
// component) rather than this repository's kube binary (all three in one).
func Upstream(bin string) bool { return filepath.Base(bin) == "kube-apiserver" }
