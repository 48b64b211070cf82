// Package helmtest adapts lab/charts to tests: real charts (Cilium from its Go module) and real
// chart servers on loopback that stop when the test ends.
package helmtest

import (
	"context"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/charts"
)

// CiliumVersion is the version of the Cilium chart the tests use.
const CiliumVersion = charts.CiliumVersion

// CiliumChartDir returns the unpacked Cilium chart from the Go module cache.
func CiliumChartDir(tb testing.TB) string {
	tb.Helper()

	dir, err := charts.CiliumChartDir()
	if err != nil {
		tb.Fatal(err)
	}

	return dir
}

// CiliumArchive packages the Cilium chart into a fresh directory and returns the .tgz path.
func CiliumArchive(tb testing.TB) string {
	tb.Helper()

	p, err := charts.CiliumArchive(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}

	return p
}

// Repository serves archives as a classic chart repository until the test ends.
func Repository(tb testing.TB, archives ...string) *charts.Server {
	tb.Helper()

	return serve(tb, charts.Repository, archives)
}

// Registry serves archives from an OCI registry until the test ends.
func Registry(tb testing.TB, archives ...string) *charts.Server {
	tb.Helper()

	return serve(tb, charts.Registry, archives)
}

func serve(tb testing.TB, start func(context.Context, ...string) (*charts.Server, error), archives []string) *charts.Server {
	tb.Helper()

	s, err := start(tb.Context(), archives...)
	if err != nil {
		tb.Fatal(err)
	}

	tb.Cleanup(func() { _ = s.Close() })

	return s
}
