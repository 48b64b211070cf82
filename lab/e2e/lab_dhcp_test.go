//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// dhcpCluster is a control plane and a worker addressed by DHCP, with the QEMU guest agent in
// the image (so the VMs have it enabled).
func dhcpCluster(l *lab.Lab) string {
	return fmt.Sprintf(`name: dhcp
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  dhcp:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: dhcp
      talosVersion: v1.11.5
      network:
        dhcp: true
        gateway: %s
      image:
        factoryUrl: ${factoryUrl}
        extensions: [siderolabs/qemu-guest-agent]
      nodes:
        cp-1:
          hostNode: pve1
          role: controlplane
        worker-1:
          hostNode: pve2
          role: worker
outputs:
  kubeconfig: ${dhcp.kubeconfig}
  nodes: ${dhcp.nodes}
`, l.Address(1))
}

// TestDHCPClusterOnTheLab: nodes get their addresses from the lab's DHCP pool, and, as on real
// Talos (siderolabs/talos#11651), their guest agent answers only once Talos is configured: in
// maintenance mode Proxmox says "QEMU guest agent is not running". The component finds each node by
// its VM's MAC address through the Talos maintenance API, applies the configuration there,
// bootstraps, and the kubeconfig works; a second preview shows no changes.
func TestDHCPClusterOnTheLab(t *testing.T) {
	t.Parallel()

	l, p := onLab(t, newEnv(t), lab.Options{Subnet: 61}, dhcpCluster)

	// A new DHCP cluster previews (its addresses, MACs and credentials are unknown then).
	if out, err := p.Run(t.Context(), "preview"); err != nil {
		t.Fatalf("preview: %v\n%s", err, out)
	}

	out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview")
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}

	// The scan ran because the agent did not answer: its address would have been taken first.
	for _, node := range []string{"cp-1", "worker-1"} {
		if !regexp.MustCompile(`node ` + node + ` is at 127\.0\.61\.\d+ \(found by its MAC address ([0-9A-F]{2}:){5}[0-9A-F]{2}\)`).MatchString(out) {
			t.Errorf("node %s was not found by its MAC address:\n%s", node, out)
		}
	}

	if l.PVE.CallCount("GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces") == 0 {
		t.Error("the guest agent was never asked: the VMs do not have it enabled")
	}

	var nodes map[string]struct {
		IP   string `json:"ip"`
		VMID int    `json:"vmId"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, p, "stack", "output", "nodes", "--json")), &nodes); err != nil {
		t.Fatal(err)
	}

	pool := netip.MustParsePrefix(fmt.Sprintf("127.0.%d.128/25", 61))
	for name, n := range nodes {
		a, err := netip.ParseAddr(n.IP)
		if err != nil || !pool.Contains(a) {
			t.Errorf("node %s at %q, not a lease from %s", name, n.IP, pool)
		}
	}

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))

	list, err := kc.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("the kubeconfig does not reach the cluster: %v", err)
	}

	if len(list.Items) != 2 {
		t.Errorf("want 2 Nodes, have %d", len(list.Items))
	}

	if out, err := p.Run(t.Context(), "preview", "--expect-no-changes", "--diff"); err != nil {
		t.Errorf("preview after up shows changes: %v\n%s", err, out)
	}

	if out, err := p.Run(t.Context(), "destroy", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}

	if vms := l.PVE.VMs(); len(vms) != 0 {
		t.Errorf("VMs left after destroy: %v", vms)
	}
}
