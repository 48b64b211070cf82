//go:build e2e

package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// inventoryCluster names what the lab's Proxmox does not have: a host pve9, a datastore ceph, a PCI
// mapping tpu, an image datastore that cannot hold `import` content, and a VM id (150) that a VM
// of someone else holds.
func inventoryCluster(l *lab.Lab) string {
	return fmt.Sprintf(`name: inventory
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  inventory:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: inventory
      talosVersion: v1.13.9
      vip: %[1]s
      network:
        gateway: %[2]s
      image:
        factoryUrl: ${factoryUrl}
        datastoreId: local-lvm
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[3]s, vmId: 150}
        worker-1: {hostNode: pve9, role: worker, ip: %[4]s}
        worker-2:
          hostNode: pve2
          role: worker
          ip: %[5]s
          datastoreId: ceph
          pciDevices: [{mapping: tpu}]
`, l.Address(10), l.Address(1), l.Address(11), l.Address(21), l.Address(22))
}

// TestInventoryProblemsAtPreview: what Proxmox lacks is reported at preview, all at once, with
// property paths, through the proxmoxve provider's own functions (the real bpg data sources,
// bridged, against the fake); `up` creates nothing (the fake holds only the foreign VM, the state
// no child). With an unreachable Proxmox API, preview fails with an error naming it, in bounded
// time.
func TestInventoryProblemsAtPreview(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 64}, inventoryCluster)

	foreignVM(t, l, "pve2", 150, "nas")

	out, err := p.Run(t.Context(), "preview")
	if err == nil {
		t.Fatalf("preview accepted what Proxmox lacks:\n%s", out)
	}

	for _, want := range []string{
		`nodes.worker-1.hostNode: "pve9" is not a node of this Proxmox cluster (nodes: pve1, pve2, pve3)`,
		`nodes.worker-2.datastoreId: datastore "ceph" does not exist on pve2`,
		`nodes.worker-2.pciDevices[0].mapping: "tpu" is not a PCI resource mapping of this Proxmox cluster (mappings: gpu)`,
		`image.datastoreId: datastore "local-lvm" on pve1, pve2 cannot hold import content`,
		`nodes.cp-1.vmId: 150 is taken by VM "nas" on pve2`,
		"(5 problems)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the preview's error has no %q:\n%s", want, out)
		}
	}

	if out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview"); err == nil {
		t.Fatalf("up went ahead:\n%s", out)
	}

	if vms := l.PVE.VMs(); len(vms) != 1 {
		t.Errorf("the fake holds %d VMs after the refused up, want only the foreign one", len(vms))
	}

	for _, host := range l.Hosts() {
		if vols := l.PVE.Volumes(host, "local"); len(vols) != 0 {
			t.Errorf("%s holds %v after the refused up", host, vols)
		}
	}

	for _, r := range exportState(t, p).Deployment.Resources {
		if strings.HasPrefix(r.Type, "proxmoxve:") || strings.HasPrefix(r.Type, "talos:") {
			t.Errorf("the state holds %s after the refused up", r.URN)
		}
	}

	// Unreachable: a closed port on loopback.
	if err := p.SetConfig(t.Context(), map[string]lab.ConfigValue{"proxmoxve:endpoint": {Value: "https://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	out, err = p.Run(t.Context(), "preview")
	took := time.Since(start)

	if err == nil || !strings.Contains(out, "checking the Proxmox inventory") || !strings.Contains(out, "proxmoxve:endpoint") {
		t.Errorf("preview against an unreachable Proxmox API (%s): %v\n%s", took, err, out)
	}

	t.Logf("preview against an unreachable Proxmox API failed in %s", took.Round(100*time.Millisecond))
}

// foreignVM creates a VM that is not the cluster's, through the fake's API as any Proxmox user
// would.
func foreignVM(t *testing.T, l *lab.Lab, host string, vmid int, name string) {
	t.Helper()

	form := url.Values{"vmid": {fmt.Sprint(vmid)}, "name": {name}, "memory": {"1024"}}

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, l.PVE.URL()+"/api2/json/nodes/"+host+"/qemu", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}

	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "PVEAPIToken="+l.APIToken())

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the lab's self-signed certificate

	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()

	if resp.StatusCode != http.StatusOK {
		t.Fatalf("creating the foreign VM %d: %s", vmid, resp.Status)
	}

	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, ok := l.PVE.VM(vmid); ok {
			return
		}
	}

	t.Fatalf("the foreign VM %d did not appear", vmid)
}
