//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/netns"
)

// Every lab checks its Proxmox API traffic against the official schema (lab/pveschema); what the
// suite checked is counted here and printed once.
var schemaChecked = struct {
	sync.Mutex
	requests map[string]int // PVE version → requests
}{requests: map[string]int{}}

// watchSchema fails tb when a request to the lab's Proxmox or an answer broke the Proxmox VE API
// schema, naming the endpoint, the field and the rule; it counts the requests checked. Call it
// right after the lab starts (its check runs before the lab closes).
func watchSchema(tb testing.TB, l *lab.Lab) {
	tb.Helper()

	tb.Cleanup(func() {
		requests, _ := l.PVE.SchemaChecks()

		schemaChecked.Lock()
		schemaChecked.requests[l.PVEVersion()] += requests
		schemaChecked.Unlock()

		if v := l.SchemaViolations(); len(v) > 0 {
			tb.Errorf("the Proxmox API traffic breaks the PVE %s API schema (%d violations):\n%s", l.PVEVersion(), len(v), strings.Join(v, "\n"))
		}
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	removeSharedPlugins()

	schemaChecked.Lock()
	versions := make([]string, 0, len(schemaChecked.requests))
	total := 0

	for v, n := range schemaChecked.requests {
		versions = append(versions, fmt.Sprintf("%d against PVE %s", n, v))
		total += n
	}
	schemaChecked.Unlock()

	if total > 0 {
		slices.Sort(versions)
		line := fmt.Sprintf("pve schema: %d requests checked (%s)\n", total, strings.Join(versions, ", "))
		fmt.Print(line)

		// go test shows a passing package's output only with -v: `make e2e` (go test -json) prints
		// it as the package's output, and the file keeps it with the slowest tests for later.
		// A test run again inside a network namespace (lab/netns) is a child process of this
		// binary: its line is printed into the test's output, and the file stays the parent's.
		if path := os.Getenv("TALOS_E2E_SUMMARY"); path != "" && !netns.Inside() {
			_ = os.WriteFile(path, []byte(line), 0o644)
		}
	}

	os.Exit(code)
}
