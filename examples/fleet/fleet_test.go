package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLoadInventoryAppliesDefaults(t *testing.T) {
	clusters, err := LoadInventory("fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}

	if len(clusters) != 3 {
		t.Fatalf("%d clusters, want 3", len(clusters))
	}

	prod, branch := clusters[0], clusters[2]
	if prod.TalosVersion != "v1.13.9" || branch.TalosVersion != "v1.14.1" {
		t.Errorf("talosVersion: prod %q (want the default v1.13.9), branch %q (want its own v1.14.1)", prod.TalosVersion, branch.TalosVersion)
	}

	if prod.Proxmox.APITokenEnv != "PROXMOX_VE_API_TOKEN" || branch.Proxmox.APITokenEnv != "BRANCH_PROXMOX_API_TOKEN" {
		t.Errorf("apiTokenEnv: prod %q, branch %q", prod.Proxmox.APITokenEnv, branch.Proxmox.APITokenEnv)
	}

	if prod.Network.Gateway != "192.168.10.1" || prod.Network.PrefixLength != 24 || len(prod.Network.Nameservers) != 2 {
		t.Errorf("prod's network = %+v; want its gateway with the default prefix length and nameservers", prod.Network)
	}

	if prod.Cilium == nil || len(prod.Nodes) != 5 || prod.Nodes["worker-1"].MemoryMib != 16384 {
		t.Errorf("prod = %+v", prod)
	}
}

func TestLoadInventoryReportsEveryProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	text := `clusters:
  - name: Bad_Name
    nodes: {cp-1: {hostNode: pve1, role: controlplane}}
  - name: a
  - name: a
    nodes: {cp-1: {hostNode: pve1, role: controlplane}}
`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	_, err := LoadInventory(path)
	if err == nil {
		t.Fatal("no error")
	}

	for _, want := range []string{
		`clusters[0].name: "Bad_Name" is not a DNS label`,
		"clusters[1].nodes: a cluster needs at least one node",
		`clusters[2].name: "a" is also clusters[1]`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}

	// A misspelt key is refused, not ignored.
	if err := os.WriteFile(path, []byte("clusters:\n  - name: a\n    talosVersoin: v1.13.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if _, err := LoadInventory(path); err == nil || !strings.Contains(err.Error(), "talosVersoin") {
		t.Errorf("a misspelt key: %v", err)
	}
}

// TestRunFleetBoundsParallelismAndIsolatesFailures: never more than parallel clusters at once,
// every cluster runs although one fails, the results keep the inventory's order, and each
// progress line carries its cluster's prefix.
func TestRunFleetBoundsParallelismAndIsolatesFailures(t *testing.T) {
	var clusters []Cluster
	for i := range 7 {
		clusters = append(clusters, Cluster{Name: fmt.Sprintf("c%d", i)})
	}

	var running, most atomic.Int32

	reconcile := func(_ context.Context, c Cluster, progress io.Writer) Result {
		n := running.Add(1)
		defer running.Add(-1)

		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}

		_, _ = fmt.Fprintf(progress, "working on %s\npart of a line", c.Name)
		time.Sleep(50 * time.Millisecond)
		_, _ = fmt.Fprintf(progress, ", finished\n")

		if c.Name == "c2" {
			return Result{Err: errors.New("update failed\n  error: hostname lookup 'pve9' failed")}
		}

		return Result{Endpoint: "https://" + c.Name + ":6443"}
	}

	var out bytes.Buffer
	results := runFleet(t.Context(), clusters, 3, &out, reconcile)

	if m := most.Load(); m != 3 {
		t.Errorf("at most %d clusters ran at once, want 3", m)
	}

	for i, r := range results {
		if r.Cluster != clusters[i].Name || !r.Started || (r.Err != nil) != (r.Cluster == "c2") {
			t.Errorf("results[%d] = %+v", i, r)
		}
	}

	for line := range strings.Lines(out.String()) {
		if !strings.HasPrefix(line, "[c") {
			t.Errorf("a progress line without its cluster: %q", line)
		}
	}

	for _, want := range []string{"[c4] working on c4\n", "[c4] part of a line, finished\n", "[c2] failed after 0s: hostname lookup 'pve9' failed\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the progress lacks %q:\n%s", want, out.String())
		}
	}

	var summary bytes.Buffer
	if failed := printSummary(&summary, results); failed != 1 {
		t.Errorf("printSummary counted %d failures, want 1", failed)
	}

	if !regexpMatch(t, `(?m)^c2\s+failed\s+\S+\s+-\s+-\s+hostname lookup 'pve9' failed$`, summary.String()) ||
		!regexpMatch(t, `(?m)^c0\s+ok\s+\S+\s+-\s+https://c0:6443\s*$`, summary.String()) {
		t.Errorf("summary:\n%s", summary.String())
	}
}

// TestRunFleetStopsStartingWhenCancelled: after an interrupt no new cluster starts, and the ones
// left out are reported.
func TestRunFleetStopsStartingWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	clusters := []Cluster{{Name: "a"}, {Name: "b"}, {Name: "c"}}

	var mu sync.Mutex
	var started []string
	results := runFleet(ctx, clusters, 1, io.Discard, func(_ context.Context, c Cluster, _ io.Writer) Result {
		mu.Lock()
		started = append(started, c.Name)
		mu.Unlock()
		cancel()

		return Result{}
	})

	if len(started) != 1 || results[1].Started || results[2].Started || results[2].Err == nil {
		t.Errorf("started %v; results %+v", started, results)
	}

	var summary bytes.Buffer
	if printSummary(&summary, results) != 2 || !strings.Contains(summary.String(), "skipped") {
		t.Errorf("summary:\n%s", summary.String())
	}
}

func regexpMatch(t *testing.T, pattern, s string) bool {
	t.Helper()

	return regexp.MustCompile(pattern).MatchString(s)
}

// The summary's error is the line that says what went wrong, not the headings above it.
func TestShortError(t *testing.T) {
	cli := errors.New("exit status 255\ncode: 255\nstdout: Updating (broken):\n" +
		" +  pulumi:pulumi:Stack talos-fleet-broken creating (0s) error: an unhandled error occurred: 1 error occurred:\n" +
		" +  pulumi:pulumi:Stack talos-fleet-broken **creating failed (0.02s)** 1 error\n" +
		"Diagnostics:\n  pulumi:pulumi:Stack (talos-fleet-broken):\n" +
		"    error: an unhandled error occurred: 1 error occurred:\n" +
		"    \t* invalid TalosProxmoxCluster inputs (1 problem):\n" +
		"      - nodes.cp-1.hostNode: \"pve9\" is not a node of this Proxmox cluster (nodes: pve1); use one of them\n")

	if got, want := shortError(cli), `nodes.cp-1.hostNode: "pve9" is not a node of this Proxmox cluster (nodes: pve1); use one of them`; got != want {
		t.Errorf("shortError = %q, want %q", got, want)
	}

	if got := shortError(errors.New("error: hostname lookup 'pve9' failed\nmore")); got != "hostname lookup 'pve9' failed" {
		t.Errorf("shortError of a one-line error = %q", got)
	}

	if got := shortError(errors.New("not started: context canceled")); got != "not started: context canceled" {
		t.Errorf("shortError without an error: line = %q", got)
	}
}
