//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
)

// bpg v0.111.1 retries a task status read only on HTTP 400 (proxmox/nodes/tasks/tasks.go,
// WaitForTask): one failed read after a VM create task succeeded fails the create before bpg
// records the VM id, and the VM is in Proxmox but not in the state. With stable VM ids the
// retried create asks for the same id, and the component's VM guard clears the leftover.

// TestCreateTaskStatusFailureLeavesNoDuplicate: the status read of the first VM create fails.
// The same `up` succeeds: the guard's error hook destroys the never-started leftover and the
// engine retries the create. Proxmox ends with exactly the state's VMs, at ids from the default
// range, and one destroy task for the leftover.
func TestCreateTaskStatusFailureLeavesNoDuplicate(t *testing.T) {
	t.Parallel()

	l, p := onSmallCluster(t, newEnv(t), "orphan", lab.Options{Subnet: 27})
	l.PVE.FailNextTaskStatus("qmcreate", 1)

	out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err != nil {
		t.Fatalf("up did not recover from the failed status read: %v\n%s", err, out)
	}

	if !strings.Contains(out, "was left by a create that failed before the VM was recorded in the state") ||
		!strings.Contains(out, "retrying create due to on-error hook request") {
		t.Errorf("up does not say it cleared the leftover and retried:\n%s", out)
	}

	assertNoDuplicateVMs(t, l, p)

	for _, vm := range l.PVE.VMs() {
		if vm.VMID < 800000 || vm.VMID > 899999 {
			t.Errorf("VM %s has id %d, outside the default vmIdRange 800000-899999", vm.Name, vm.VMID)
		}
	}

	if n := countTasks(l, "qmdestroy"); n != 1 {
		t.Errorf("want 1 destroy (the leftover), have %d", n)
	}

	assertConverged(t, l, p)
	previewDestroyEmpty(t, l, p)
}

// TestLeftoverFromAnEarlierUp: the guard cannot destroy the leftover (every VM destroy fails),
// so the up fails and the leftover stays. Then:
//   - once it has been started by someone, the next preview warns and the up refuses to touch it,
//     both printing the command that adopts it; nothing is created or destroyed;
//   - running exactly that command and `up` converge with no duplicate.
func TestLeftoverFromAnEarlierUp(t *testing.T) {
	t.Parallel()

	l, p := onSmallCluster(t, newEnv(t), "leftover", lab.Options{Subnet: 39})
	vm := leaveLeftover(t, l, p)
	powerOn(t, l, vm)
	l.PVE.SetRouteFailureRate(destroyRoute, 0)

	if out, err := p.Run(t.Context(), "preview"); err != nil || !strings.Contains(out, "unless this preview replaces the node's VM") ||
		!strings.Contains(out, "pulumi import") {
		t.Errorf("preview with a started leftover: want the warning with the import command, have %v\n%s", err, out)
	}

	out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err == nil || !strings.Contains(out, "has run, but it is not in this stack's state") {
		t.Fatalf("up with a started leftover: want the not-in-state error, have %v\n%s", err, out)
	}

	if _, ok := l.PVE.VM(vm.VMID); !ok || sameName(l, vm.Name) != 1 {
		t.Fatalf("the started leftover was touched or duplicated: %v", l.PVE.VMs())
	}

	m := regexp.MustCompile("`(pulumi import [^`]+)`").FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the error gives no import command:\n%s", out)
	}

	args := append(shellWords(t, strings.TrimPrefix(m[1], "pulumi ")), "--yes")
	if out, err := p.Run(t.Context(), args...); err != nil {
		t.Fatalf("the printed command %q failed: %v\n%s", m[1], err, out)
	}

	if out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("up after the import: %v\n%s", err, out)
	}

	assertNoDuplicateVMs(t, l, p)
	assertConverged(t, l, p)

	previewDestroyEmpty(t, l, p)
}

// TestNeverStartedLeftoverFromAnEarlierUp: as above, but the leftover never ran: the next up's
// before-create check destroys it and creates the node's VM, with no duplicate.
func TestNeverStartedLeftoverFromAnEarlierUp(t *testing.T) {
	t.Parallel()

	l, p := onSmallCluster(t, newEnv(t), "neverstarted", lab.Options{Subnet: 59})
	leaveLeftover(t, l, p)
	l.PVE.SetRouteFailureRate(destroyRoute, 0)

	if out, err := p.Run(t.Context(), "preview"); err != nil || !strings.Contains(out, "pulumi up destroys it and creates the node's VM again") {
		t.Errorf("preview with a never-started leftover: want the warning, have %v\n%s", err, out)
	}

	if n := len(orphanVMs(t, l, p)); n != 1 {
		t.Errorf("preview touched the leftover: %d VMs outside the state", n)
	}

	out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err != nil || !strings.Contains(out, "it never started); destroying it") {
		t.Fatalf("up did not clear the never-started leftover: %v\n%s", err, out)
	}

	assertNoDuplicateVMs(t, l, p)
	assertConverged(t, l, p)
	previewDestroyEmpty(t, l, p)
}

// destroyRoute is Proxmox's VM destroy, which leaveLeftover makes fail.
const destroyRoute = "DELETE /nodes/{node}/qemu/{vmid}"

// leaveLeftover runs an `up` whose first VM create fails on its task status and whose every VM
// destroy fails, so the guard cannot clear the leftover: the up fails and the leftover stays,
// the only VM outside the state. Destroys keep failing until the caller turns that off.
func leaveLeftover(t *testing.T, l *lab.Lab, p *lab.Pulumi) pvefake.VM {
	t.Helper()

	l.PVE.FailNextTaskStatus("qmcreate", 1)
	l.PVE.SetRouteFailureRate(destroyRoute, 1)

	if out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview"); err == nil {
		t.Fatalf("up succeeded although the leftover could not be destroyed:\n%s", out)
	}

	leftover := orphanVMs(t, l, p)
	if len(leftover) != 1 {
		t.Fatalf("want one VM outside the state, have %v", leftover)
	}

	return leftover[0]
}

// orphanVMs are the fake's VMs that the state does not hold.
func orphanVMs(t *testing.T, l *lab.Lab, p *lab.Pulumi) []pvefake.VM {
	t.Helper()

	inState, _ := proxmoxInState(exportState(t, p))

	var out []pvefake.VM
	for _, vm := range l.PVE.VMs() {
		key := fmt.Sprintf("%s/%d %s", vm.Node, vm.VMID, vm.Name)
		if !containsString(inState, key) {
			out = append(out, vm)
		}
	}

	return out
}

func assertNoDuplicateVMs(t *testing.T, l *lab.Lab, p *lab.Pulumi) {
	t.Helper()

	if o := orphanVMs(t, l, p); len(o) > 0 {
		t.Errorf("VMs in Proxmox but not in the state: %v", o)
	}

	for _, vm := range l.PVE.VMs() {
		if n := sameName(l, vm.Name); n != 1 {
			t.Errorf("%d VMs named %s", n, vm.Name)
		}
	}
}

func sameName(l *lab.Lab, name string) int {
	n := 0
	for _, vm := range l.PVE.VMs() {
		if vm.Name == name {
			n++
		}
	}

	return n
}

func countTasks(l *lab.Lab, typ string) int {
	n := 0
	for _, task := range l.PVE.Tasks() {
		if task.Type == typ {
			n++
		}
	}

	return n
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}

	return false
}

// powerOn starts a VM through the Proxmox API, as a user would.
func powerOn(t *testing.T, l *lab.Lab, vm pvefake.VM) {
	t.Helper()

	req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/api2/json/nodes/%s/qemu/%d/status/start", vm.Node, vm.VMID), nil)
	req.Header.Set("Authorization", "PVEAPIToken="+l.APIToken())

	w := httptest.NewRecorder()
	l.PVE.ServeHTTP(w, req)

	if w.Code != http.StatusOK {
		t.Fatalf("starting VM %d: %d %s", vm.VMID, w.Code, w.Body)
	}
}

// shellWords splits a command line with single-quoted words, as a POSIX shell would.
func shellWords(t *testing.T, line string) []string {
	t.Helper()

	var (
		words  []string
		cur    strings.Builder
		quoted bool
		inWord bool
	)

	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}

	if quoted {
		t.Fatalf("unbalanced quote in %q", line)
	}

	if inWord {
		words = append(words, cur.String())
	}

	return words
}
