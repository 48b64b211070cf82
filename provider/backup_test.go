package provider

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// soloJSON is one control plane and one worker; backup is spliced in as more properties.
func soloJSON(backup string) string {
	return `{
  "clusterName": "solo",
  "talosVersion": "v1.11.5",
  "network": {"gateway": "10.0.0.1"},
  ` + backup + `
  "nodes": {
    "cp-1": {"hostNode": "pve1", "role": "controlplane", "ip": "10.0.0.11", "vmId": 111},
    "worker-1": {"hostNode": "pve2", "role": "worker", "ip": "10.0.0.21", "vmId": 121}
  }
}`
}

// runningSolo is an inventory where solo's VMs exist, cp-1's on host cpHost.
func runningSolo(cpHost string) *mockInventory {
	inv := labInventory()
	inv.VMs = []map[string]any{
		{"vmId": 111, "name": "cp-1", "nodeName": cpHost, "tags": []string{"controlplane", "solo", "talos"}},
		{"vmId": 121, "name": "worker-1", "nodeName": "pve2", "tags": []string{"solo", "talos", "worker"}},
	}

	return inv
}

// TestReplacingTheOnlyControlPlaneIsRefusedOrRestored: moving a running cluster's only control
// plane to another host is refused without a way to keep etcd's data, before anything is
// registered; with etcdBackup the snapshot comes before the VMs, and the bootstrap (replaced with
// the control plane's VM) restores the snapshot.
func TestReplacingTheOnlyControlPlaneIsRefusedOrRestored(t *testing.T) {
	t.Parallel()

	r := &recorder{proxmox: runningSolo("pve2")}

	_, err := construct(t, r, "solo", inputsFromJSON(t, soloJSON("")))
	if err == nil || !strings.Contains(err.Error(), "replaces control plane cp-1 (its VM moves from Proxmox host pve2 to pve1)") {
		t.Fatalf("error %v", err)
	}

	if n := len(r.custom()); n != 0 {
		t.Errorf("%d resources registered before the refusal", n)
	}

	r = &recorder{proxmox: runningSolo("pve2")}
	if _, err := construct(t, r, "solo", inputsFromJSON(t, soloJSON(`"etcdBackup": {"destination": "file:///backups"},`))); err != nil {
		t.Fatal(err)
	}

	snap := r.named("solo-etcd-snapshot")
	snap.URN = urnOf(r, "solo-etcd-snapshot")

	if snap.Type != "talos-proxmox:lifecycle:EtcdSnapshot" {
		t.Fatalf("no etcd snapshot: %+v", snap)
	}

	if trigger := snap.Inputs.Get("trigger").AsString(); !strings.Contains(trigger, "cp-1@pve1/111") {
		t.Errorf("trigger %q does not name the control plane where it goes", trigger)
	}

	if cps := snap.Inputs.Get("controlPlanes").AsMap(); cps.Get("cp-1").AsString() != "10.0.0.11" || cps.Len() != 1 {
		t.Errorf("snapshot from %v, want cp-1 at its address", cps)
	}

	for _, vm := range r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine") {
		if !slices.Contains(vm.Dependencies, snap.URN) {
			t.Errorf("VM %s does not wait for the snapshot: %v", vm.Name, vm.Dependencies)
		}
	}

	boot := r.named("solo-bootstrap")
	if !slices.Contains(boot.Dependencies, snap.URN) || !slices.Contains(boot.PropertyDependencies["recoverFrom"], snap.URN) {
		t.Errorf("the bootstrap does not restore the snapshot: dependencies %v, recoverFrom from %v", boot.Dependencies, boot.PropertyDependencies["recoverFrom"])
	}

	for _, step := range []string{"solo-cp-1-upgrade", "solo-worker-1-upgrade", "solo-kubernetes", "solo-membership", "solo-cp-1-retire"} {
		if reg := r.named(step); !slices.Contains(reg.Dependencies, snap.URN) {
			t.Errorf("%s does not wait for the snapshot: %v", step, reg.Dependencies)
		}
	}
}

// TestNewClusterTakesNoSnapshot: a new cluster has nothing to keep: the snapshot resource
// records (empty trigger) and no VM waits for it; its bootstrap restores nothing.
func TestNewClusterTakesNoSnapshot(t *testing.T) {
	t.Parallel()

	r := &recorder{}
	if _, err := construct(t, r, "solo", inputsFromJSON(t, soloJSON(`"etcdBackup": {"destination": "file:///backups", "keep": 3},`))); err != nil {
		t.Fatal(err)
	}

	snap := r.named("solo-etcd-snapshot")
	snap.URN = urnOf(r, "solo-etcd-snapshot")

	if snap.Inputs.Get("trigger").AsString() != "" || snap.Inputs.Get("keep").AsNumber() != 3 {
		t.Errorf("snapshot inputs %v", snap.Inputs)
	}

	for _, vm := range r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine") {
		if slices.Contains(vm.Dependencies, snap.URN) {
			t.Errorf("VM %s of a new cluster waits for the snapshot", vm.Name)
		}
	}

	if v, ok := r.named("solo-bootstrap").Inputs.GetOk("recoverFrom"); ok && !v.IsNull() {
		t.Errorf("a new cluster's bootstrap restores %v", v)
	}
}

// TestScheduledBackupsReachTheControlPlanesOnly: etcdBackup.schedule adds the talos-backup
// manifest to the control planes' configuration and grants its Talos API access there (Talos' own
// validator checks every configuration before any VM), never on workers.
func TestScheduledBackupsReachTheControlPlanesOnly(t *testing.T) {
	t.Parallel()

	for _, version := range []string{"v1.11.5", "v1.14.1"} {
		r := &recorder{}

		props := strings.Replace(soloJSON(`"etcdBackup": {"destination": "s3://backups/etcd?region=eu-west-1", "schedule": "0 */6 * * *"},`),
			"v1.11.5", version, 1)
		if _, err := construct(t, r, "solo", inputsFromJSON(t, props)); err != nil {
			t.Fatalf("%s: %v", version, err)
		}

		cp := r.named("solo-cp-1-config").Inputs.Get("machineConfigurationInput").AsString()
		worker := r.named("solo-worker-1-config").Inputs.Get("machineConfigurationInput").AsString()

		for _, want := range []string{"name: talos-proxmox-etcd-backup", "os:etcd:backup", "kind: CronJob", "0 */6 * * *"} {
			if !strings.Contains(cp, want) {
				t.Errorf("%s: the control plane's configuration has no %q", version, want)
			}
		}

		if strings.Contains(worker, "os:etcd:backup") || strings.Contains(worker, "talos-backup") {
			t.Errorf("%s: the worker's configuration grants etcd backups", version)
		}
	}
}

// TestRecoveryReadsTheSnapshotBeforeAnything: when the cluster has no control plane VM,
// recovery.fromSnapshot is looked for at preview and read and verified at `up` before anything is
// registered: a missing or corrupt snapshot fails naming the property, with nothing registered.
func TestRecoveryReadsTheSnapshotBeforeAnything(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "etcd-20261127T000000Z-r9.snapshot"), []byte("not a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, object string
		dryRun       bool
		want         string
	}{
		{"missing at preview", "etcd-missing.snapshot", true, "recovery.fromSnapshot: there is no object at"},
		{"missing at up", "etcd-missing.snapshot", false, "recovery.fromSnapshot: "},
		{"corrupt at up", "etcd-20261127T000000Z-r9.snapshot", false, "recovery.fromSnapshot: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			r := &recorder{proxmox: labInventory()}
			props := soloJSON(`"recovery": {"fromSnapshot": "file://` + dir + `/` + tc.object + `"},`)

			_, err := constructAs(t, r, "solo", inputsFromJSON(t, props), tc.dryRun)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}

			if vms := r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine"); len(vms) != 0 {
				t.Errorf("%d VMs registered before the snapshot was read", len(vms))
			}
		})
	}

	// A running cluster (its control plane has a VM) does not restore: the snapshot is not read.
	r := &recorder{proxmox: runningSolo("pve1")}
	if _, err := construct(t, r, "solo", inputsFromJSON(t, soloJSON(`"recovery": {"fromSnapshot": "file://`+dir+`/etcd-missing.snapshot"},`))); err != nil {
		t.Errorf("a running cluster read recovery.fromSnapshot: %v", err)
	}
}

// TestRenamingARunningClusterIsRefused: the record holds the name the cluster was created with; a
// new clusterName is refused (it would make a new cluster and delete this one), unless
// allowDataLoss, with which the record follows the new name.
func TestRenamingARunningClusterIsRefused(t *testing.T) {
	t.Parallel()

	r := &recorder{proxmox: runningSolo("pve1"), recordedName: "solo"}

	// Without pinned VM ids (pinned ones would be refused as another cluster's VMs already).
	renamed := strings.NewReplacer(`"clusterName": "solo"`, `"clusterName": "solo2"`, `, "vmId": 111`, "", `, "vmId": 121`, "").
		Replace(soloJSON(""))

	_, err := construct(t, r, "solo", inputsFromJSON(t, renamed))
	if err == nil || !strings.Contains(err.Error(), `clusterName: this cluster was created as "solo"`) {
		t.Fatalf("error %v", err)
	}

	if vms := r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine"); len(vms) != 0 {
		t.Errorf("%d VMs registered before the refusal", len(vms))
	}

	r = &recorder{proxmox: runningSolo("pve1"), recordedName: "solo"}

	allowed := strings.Replace(renamed, `"network"`, `"allowDataLoss": true, "network"`, 1)
	if _, err := construct(t, r, "solo", inputsFromJSON(t, allowed)); err != nil {
		t.Fatalf("with allowDataLoss: %v", err)
	}

	if rec := r.named("solo-kubernetes-version"); slices.Contains(rec.IgnoreChanges, "clusterName") {
		t.Errorf("with allowDataLoss the record keeps the old name: %v", rec.IgnoreChanges)
	}
}
