// Package helmtest gives the Helm tests real charts and real chart servers: the Cilium chart
// from its Go module (fetched through the Go module proxy when first needed, never committed), a
// classic HTTP chart repository whose index is written by Helm's repo package, and an OCI
// registry (distribution/v3, in memory), all on loopback and stopped when the test ends.
package helmtest

import (
	"context"
	"testing"
)

// CiliumChartDir returns the unpacked Cilium chart from the Go module cache.
func CiliumChartDir(tb testing.TB) string {
	tb.Helper()

	dir, err := ciliumChartDir()
	if err != nil {
		tb.Fatal(err)
	}

	return dir
}

// CiliumArchive packages the Cilium chart into a fresh directory and returns the .tgz path.
func CiliumArchive(tb testing.TB) string {
	tb.Helper()

	p, err := packageChart(CiliumChartDir(tb), tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}

	return p
}

// Repository serves archives as a classic chart repository until the test ends.
func Repository(tb testing.TB, archives ...string) *Server {
	tb.Helper()

	return serveFor(tb, startRepository, archives)
}

// Registry serves archives from an OCI registry until the test ends.
func Registry(tb testing.TB, archives ...string) *Server {
	tb.Helper()

	return serveFor(tb, startRegistry, archives)
}

func serveFor(tb testing.TB, start func(context.Context, ...string) (*Server, error), archives []string) *Server {
	tb.Helper()

	s, err := start(tb.Context(), archives...)
	if err != nil {
		tb.Fatal(err)
	}

	tb.Cleanup(func() { _ = s.Close() })

	return s
}

// Archive packages the chart in chartDir into a fresh directory and returns the .tgz path.
func Archive(tb testing.TB, chartDir string) string {
	tb.Helper()

	p, err := packageChart(chartDir, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}

	return p
}
