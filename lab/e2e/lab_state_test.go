//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// The bridged bpg resource types whose state must match Proxmox exactly, and the component.
const (
	vmType        = "proxmoxve:VM/virtualMachine:VirtualMachine"
	fileType      = "proxmoxve:Download/file:File"
	componentType = "talos-proxmox:index:TalosProxmoxCluster"
)

// smallCluster is a YAML program of one control plane on pve1 and one worker on pve2 (two
// image downloads, two VMs) without pinned VM ids: Proxmox hands them out, so a VM created
// twice shows up as a second VM rather than as an "already exists" error.
func smallCluster(l *lab.Lab, name string) string {
	return fmt.Sprintf(`name: %[1]s
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  %[1]s:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: %[1]s
      talosVersion: v1.11.5
      network:
        gateway: %[2]s
      image:
        factoryUrl: ${factoryUrl}
      nodes:
        cp-1:
          hostNode: pve1
          role: controlplane
          ip: %[3]s
        worker-1:
          hostNode: pve2
          role: worker
          ip: %[4]s
outputs:
  endpoint: ${%[1]s.endpoint}
`, name, l.Address(1), l.Address(11), l.Address(21))
}

// onSmallCluster starts a lab with opts and prepares a stack "lab" of smallCluster on it.
func onSmallCluster(t *testing.T, e *env, name string, opts lab.Options) (*lab.Lab, *lab.Pulumi) {
	t.Helper()

	return onLab(t, e, opts, func(l *lab.Lab) string { return smallCluster(l, name) })
}

// stackState is the part of `pulumi stack export` the tests read.
type stackState struct {
	Deployment struct {
		Resources []struct {
			URN        string         `json:"urn"`
			Type       string         `json:"type"`
			ID         string         `json:"id"`
			Outputs    map[string]any `json:"outputs"`
			InitErrors []string       `json:"initErrors"`
		} `json:"resources"`
		PendingOperations []struct {
			Resource struct {
				URN      string         `json:"urn"`
				Type     string         `json:"type"`
				Inputs   map[string]any `json:"inputs"`
				Provider string         `json:"provider"`
			} `json:"resource"`
			Type string `json:"type"`
		} `json:"pending_operations"`
	} `json:"deployment"`
}

func exportState(t *testing.T, p *lab.Pulumi) stackState {
	t.Helper()

	var st stackState
	if err := json.Unmarshal([]byte(mustRun(t, p, "stack", "export")), &st); err != nil {
		t.Fatal(err)
	}

	return st
}

// proxmoxInState lists the VMs ("pve1/101 cp-1") and downloaded files
// ("pve1/local:import/x.qcow2") the state holds.
func proxmoxInState(st stackState) (vms, files []string) {
	vms, files = []string{}, []string{}

	for _, r := range st.Deployment.Resources {
		switch r.Type {
		case vmType:
			vms = append(vms, fmt.Sprintf("%v/%s %v", r.Outputs["nodeName"], r.ID, r.Outputs["name"]))
		case fileType:
			files = append(files, fmt.Sprintf("%v/%s", r.Outputs["nodeName"], r.ID))
		}
	}

	slices.Sort(vms)
	slices.Sort(files)

	return vms, files
}

// proxmoxInFake lists the fake's VMs and downloaded files as proxmoxInState does, and the VM
// disks of no VM.
func proxmoxInFake(l *lab.Lab) (vms, files, strayDisks []string) {
	vms, files, strayDisks = []string{}, []string{}, []string{}
	ids := map[int]bool{}

	for _, vm := range l.PVE.VMs() {
		vms = append(vms, fmt.Sprintf("%s/%d %s", vm.Node, vm.VMID, vm.Name))
		ids[vm.VMID] = true
	}

	for _, host := range []string{"pve1", "pve2", "pve3"} {
		for _, v := range l.PVE.Volumes(host, "local") {
			files = append(files, host+"/"+v.VolID)
		}

		for _, v := range l.PVE.Volumes(host, "local-lvm") {
			if !ids[v.VMID] {
				strayDisks = append(strayDisks, host+"/"+v.VolID)
			}
		}
	}

	slices.Sort(vms)
	slices.Sort(files)

	return vms, files, strayDisks
}

// assertStateAgrees: no pending operation, and exactly the VMs and files of the state exist in
// Proxmox: nothing orphaned, nothing missing. This holds after every `up`, failed or not; a
// resource whose create failed half-way is in the state with initialization errors.
func assertStateAgrees(t *testing.T, l *lab.Lab, st stackState) {
	t.Helper()

	for _, op := range st.Deployment.PendingOperations {
		t.Errorf("pending operation left in the state: %s %s", op.Type, op.Resource.URN)
	}

	stateVMs, stateFiles := proxmoxInState(st)
	fakeVMs, fakeFiles, stray := proxmoxInFake(l)

	if !slices.Equal(stateVMs, fakeVMs) {
		t.Errorf("VMs in the state %v, in Proxmox %v", stateVMs, fakeVMs)
	}

	if !slices.Equal(stateFiles, fakeFiles) {
		t.Errorf("downloaded files in the state %v, in Proxmox %v", stateFiles, fakeFiles)
	}

	if len(stray) > 0 {
		t.Errorf("VM disks of no VM in Proxmox: %v", stray)
	}
}

// assertOnlyLeftovers is what holds after a failed run when task status reads fail too: no
// pending operation, everything the state holds exists in Proxmox, no node has two VMs and no
// disk belongs to no VM. Proxmox may hold what a create that failed on its task status left
// outside the state: a never-started VM at its node's id (the VM guard clears it) or a
// downloaded file (the next download replaces it). assertStateAgrees holds once a run succeeds.
func assertOnlyLeftovers(t *testing.T, l *lab.Lab, st stackState) {
	t.Helper()

	for _, op := range st.Deployment.PendingOperations {
		t.Errorf("pending operation left in the state: %s %s", op.Type, op.Resource.URN)
	}

	stateVMs, stateFiles := proxmoxInState(st)
	fakeVMs, fakeFiles, stray := proxmoxInFake(l)

	for _, want := range stateVMs {
		if !slices.Contains(fakeVMs, want) {
			t.Errorf("VM %s is in the state but not in Proxmox (%v)", want, fakeVMs)
		}
	}

	for _, want := range stateFiles {
		if !slices.Contains(fakeFiles, want) {
			t.Errorf("file %s is in the state but not in Proxmox (%v)", want, fakeFiles)
		}
	}

	names := map[string]int{}
	for _, vm := range l.PVE.VMs() {
		if names[vm.Name]++; names[vm.Name] == 2 {
			t.Errorf("two VMs named %s in Proxmox: %v", vm.Name, fakeVMs)
		}

		if key := fmt.Sprintf("%s/%d %s", vm.Node, vm.VMID, vm.Name); !slices.Contains(stateVMs, key) && vm.Running {
			t.Errorf("VM %s runs but is not in the state", key)
		}
	}

	if len(stray) > 0 {
		t.Errorf("VM disks of no VM in Proxmox: %v", stray)
	}
}

// assertConverged: the state agrees with Proxmox, nothing is left half-created, both VMs run
// and both emulated Talos nodes got their configuration.
func assertConverged(t *testing.T, l *lab.Lab, p *lab.Pulumi) {
	t.Helper()

	st := exportState(t, p)
	assertStateAgrees(t, l, st)

	for _, r := range st.Deployment.Resources {
		if len(r.InitErrors) > 0 {
			t.Errorf("%s is left with initialization errors: %v", r.URN, r.InitErrors)
		}
	}

	vms, files := proxmoxInState(st)
	if len(vms) != 2 || len(files) != 2 {
		t.Errorf("want 2 VMs and 2 downloads, have %v and %v", vms, files)
	}

	for _, vm := range l.PVE.VMs() {
		if !vm.Running {
			t.Errorf("VM %d (%s) is not running", vm.VMID, vm.Name)
		}
	}

	configured := 0
	for _, n := range l.Controller.Nodes() {
		if n.State() != talosemu.StateMaintenance {
			configured++
		}
	}

	if configured != 2 {
		t.Errorf("%d emulated Talos nodes are configured, want 2", configured)
	}
}

// assertProxmoxEmpty: no VM, no downloaded file, no disk left, and no Proxmox resource in the
// state.
func assertProxmoxEmpty(t *testing.T, l *lab.Lab, p *lab.Pulumi) {
	t.Helper()

	vms, files, stray := proxmoxInFake(l)
	if len(vms)+len(files)+len(stray) > 0 {
		t.Errorf("Proxmox is not empty after destroy: VMs %v, files %v, disks %v", vms, files, stray)
	}

	vms, files = proxmoxInState(exportState(t, p))
	if len(vms)+len(files) > 0 {
		t.Errorf("the state still holds %v %v after destroy", vms, files)
	}
}

// previewDestroyEmpty: preview shows no changes, and destroy leaves Proxmox empty.
func previewDestroyEmpty(t *testing.T, l *lab.Lab, p *lab.Pulumi) {
	t.Helper()

	if out, err := p.Run(t.Context(), "preview", "--expect-no-changes", "--diff"); err != nil {
		t.Errorf("preview shows changes: %v\n%s", err, out)
	}

	if out, err := p.Run(t.Context(), "destroy", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}

	assertProxmoxEmpty(t, l, p)
}
