//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// sharedPlugins is one plugin directory holding the three plugins of a lab stack (the component
// and the lab's talos and proxmoxve builds), installed once per test process by the real
// `pulumi plugin install`. Each lab test's PULUMI_HOME/plugins links to it instead of installing
// the three again: `pulumi plugin install --file` packs the binary into a tarball and unpacks
// it, about 1.7 s of CPU for each plugin of each test on 2 cores. The engine installs nothing
// there (PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION); what it writes, each plugin's cached
// schema, it writes by an atomic rename, so concurrent tests share it safely. The release tests,
// which prove the install itself, keep their own. A test process killed by its timeout leaves the
// directory in the system's temporary directory.
var sharedPlugins struct {
	once sync.Once
	home string
	err  error
}

// useLabPlugins gives e's PULUMI_HOME the lab stack's plugins (see sharedPlugins).
func useLabPlugins(tb testing.TB, e *env) {
	tb.Helper()

	sharedPlugins.once.Do(func() {
		home, err := os.MkdirTemp("", "e2e-plugins-")
		if err != nil {
			sharedPlugins.err = err
			return
		}

		sharedPlugins.home = home

		// Not the first test's context: the install outlives nothing, but a test that ends
		// early must not leave every other test without plugins.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()

		p := &lab.Pulumi{Bin: e.bin, Dir: e.dir, Env: append(slices.Clone(e.environ), "PULUMI_HOME="+home)}
		sharedPlugins.err = p.InstallPlugins(ctx, lab.Plugins(e.plugin, e.version, os.Getenv("TALOS_LAB_BIN")))
	})

	if sharedPlugins.err != nil {
		tb.Fatalf("installing the lab's plugins: %v", sharedPlugins.err)
	}

	if err := os.MkdirAll(e.home, 0o755); err != nil {
		tb.Fatal(err)
	}

	if err := os.Symlink(filepath.Join(sharedPlugins.home, "plugins"), filepath.Join(e.home, "plugins")); err != nil {
		tb.Fatal(err)
	}
}

// removeSharedPlugins deletes the shared plugin directory once every test has ended.
func removeSharedPlugins() {
	if sharedPlugins.home != "" {
		_ = os.RemoveAll(sharedPlugins.home)
	}
}
