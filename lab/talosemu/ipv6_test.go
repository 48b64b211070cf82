package talosemu_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/netns"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// An IPv6-only cluster inside the lab's network namespace (lab/netns): a control plane reached at
// its IPv6 address, etcd advertising it, the API server on an IPv6 VIP (Layer2VIPConfig on an
// aliased link) with IPv6 service and pod subnets, the Node's InternalIP IPv6; and a dual-stack
// worker answering at both of its addresses.
func TestIPv6OnlyClusterInTheNamespace(t *testing.T) {
	if netns.Run(t) {
		return
	}

	cluster := kubeCluster(t)
	ip, vip, wip4, wip6 := netns.Addr(0x77, 0x11), netns.Addr(0x77, 0x10), nextHost(), netns.Addr(0x77, 0x21)

	cp := startNode(t, talosemu.Options{Cluster: cluster, Address: ip.String(), TalosVersion: "v1.12.4", NICs: []talosemu.NIC{
		{MAC: mac0, Addresses: []netip.Prefix{netip.PrefixFrom(ip, 64)}},
	}})

	if cp.IP() != ip.String() {
		t.Fatalf("IP() = %s", cp.IP())
	}

	install(t, cp, machineConfig(t, machine.TypeControlPlane, "cp-1", fmt.Sprintf(`machine:
  kubelet:
    nodeIP:
      validSubnets: ["%[1]s"]
cluster:
  controlPlane:
    endpoint: https://[%[2]s]:6443
  allowSchedulingOnControlPlanes: true
  network:
    podSubnets: ["fd00:10:244::/56"]
    serviceSubnets: ["fd00:10:96::/112"]
  etcd:
    advertisedSubnets: ["%[1]s"]
---
apiVersion: v1alpha1
kind: LinkAliasConfig
name: net0
selector:
  match: mac(link.permanent_addr) == "%[3]s"
---
apiVersion: v1alpha1
kind: LinkConfig
name: net0
up: true
addresses:
  - address: %[4]s/64
---
apiVersion: v1alpha1
kind: Layer2VIPConfig
name: %[2]s
link: net0
`, talosemu.LabIPv6Prefix, vip, mac0, ip)))

	if err := secureClient(t, cp).Bootstrap(nodeCtx(t, cp), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	waitStateFor(t, cp, 30*time.Second, talosemu.StateBootstrapped)

	kc := waitClusterClient(t, cluster, "the API server on the IPv6 VIP")

	eventually(t, 60*time.Second, "the Node's address", func() error {
		n, err := kc.CoreV1().Nodes().Get(t.Context(), "cp-1", metav1.GetOptions{})
		if err != nil {
			return err
		}

		if want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip.String()}, {Type: corev1.NodeHostName, Address: "cp-1"}}; !slices.Equal(n.Status.Addresses, want) {
			return fmt.Errorf("addresses %v, want %v", n.Status.Addresses, want)
		}

		return nil
	})

	if got := addresses(t, nodeCtx(t, cp), secureClient(t, cp)); !slices.Contains(got, "eth0/"+vip.String()+"/128") {
		t.Fatalf("addresses = %v: no VIP", got)
	}

	// A dual-stack node answers at both of its addresses.
	startNode(t, talosemu.Options{Cluster: cluster, Address: wip4, NICs: []talosemu.NIC{
		{MAC: mac1, Addresses: []netip.Prefix{netip.MustParsePrefix(wip4 + "/24"), netip.PrefixFrom(wip6, 64)}},
	}})

	for _, a := range []string{wip4, wip6.String()} {
		c, err := client.New(t.Context(), client.WithEndpoints(a),
			client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // maintenance mode
		if err != nil {
			t.Fatal(err)
		}

		if _, err := c.Disks(client.WithNode(t.Context(), a)); err != nil {
			t.Errorf("the dual-stack node at %s: %v", a, err)
		}

		c.Close() //nolint:errcheck
	}

	if c, err := net.DialTimeout("tcp", net.JoinHostPort(wip6.String(), "50000"), time.Second); err != nil {
		t.Errorf("dialing the dual-stack node's IPv6 address: %v", err)
	} else {
		c.Close() //nolint:errcheck
	}

}
