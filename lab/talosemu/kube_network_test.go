package talosemu_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// A dual-stack control plane whose IPv6 family comes first (validSubnets, service and pod subnets
// in that order), behind a VIP. While the VIP's interface names a MAC the VM lacks, no node holds
// the VIP and the API server, which answers there, never comes up; once the configuration names
// the right NIC, the VIP lands on eth0, the API server runs (advertising the control plane's
// IPv6 address, which must be of the first service family) and the Node reports one InternalIP
// per family in validSubnets' order, as do its pods' host IPs and its pods' IPs (from the node's
// pod CIDRs). A worker whose validSubnets match none of its addresses never registers.
func TestDualStackNodeAddressesAndVIP(t *testing.T) {
	t.Parallel()

	cluster := kubeCluster(t)
	ip, vip, wip := nextHost(), nextHost(), nextHost()
	v6 := netip.MustParseAddr("fd1a:b:0:77::" + strings.ReplaceAll(strings.TrimPrefix(ip, "127.77."), ".", "")).String()

	network := func(mac string) string {
		return fmt.Sprintf(`machine:
  kubelet:
    nodeIP:
      validSubnets: ["fd1a:b::/48", "127.77.0.0/16"]
  network:
    interfaces:
      - deviceSelector: {hardwareAddr: "%s"}
        addresses: ["%s/24", "%s/64"]
        vip: {ip: %s}
cluster:
  controlPlane:
    endpoint: https://%s:6443
  allowSchedulingOnControlPlanes: true
  network:
    podSubnets: ["fd00:10:244::/56", "10.244.0.0/16"]
    serviceSubnets: ["fd00:10:96::/112", "10.96.0.0/12"]
  etcd:
    advertisedSubnets: ["127.77.0.0/16"]
`, mac, ip, v6, vip, vip)
	}

	cp := startNode(t, talosemu.Options{Cluster: cluster, Address: ip, TalosVersion: "v1.11.5",
		NICs: fourNICs(prefix(ip, 24), prefix(v6, 64))})
	install(t, cp, machineConfig(t, machine.TypeControlPlane, "cp-1", network("bc:24:11:00:00:99")))

	if err := secureClient(t, cp).Bootstrap(nodeCtx(t, cp), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	waitStateFor(t, cp, 30*time.Second, talosemu.StateBootstrapped)
	time.Sleep(3 * time.Second)

	if cluster.Kubernetes() != nil {
		t.Fatal("the API server runs on a VIP no control plane holds")
	}

	if got := addresses(t, nodeCtx(t, cp), secureClient(t, cp)); slices.Contains(got, "eth0/"+vip+"/32") {
		t.Fatalf("addresses = %v: the VIP is held on a link the configuration does not name", got)
	}

	_, err := secureClient(t, cp).ApplyConfiguration(nodeCtx(t, cp), &machineapi.ApplyConfigurationRequest{
		Data: machineConfig(t, machine.TypeControlPlane, "cp-1", network(mac0)),
		Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT,
	})
	if err != nil {
		t.Fatal(err)
	}

	eventually(t, 10*time.Second, "the VIP on eth0", func() error {
		if got := addresses(t, nodeCtx(t, cp), secureClient(t, cp)); !slices.Contains(got, "eth0/"+vip+"/32") {
			return fmt.Errorf("addresses %v", got)
		}

		return nil
	})

	w := startNode(t, talosemu.Options{Cluster: cluster, Address: wip})
	install(t, w, machineConfig(t, machine.TypeWorker, "w-1", fmt.Sprintf(
		"machine:\n  kubelet:\n    nodeIP:\n      validSubnets: [10.99.0.0/16]\ncluster:\n  controlPlane:\n    endpoint: https://%s:6443\n", vip)))

	kc := waitClusterClient(t, cluster, "the API server")

	ctx := t.Context()

	eventually(t, 60*time.Second, "the Node's addresses", func() error {
		n, err := kc.CoreV1().Nodes().Get(ctx, "cp-1", metav1.GetOptions{})
		if err != nil {
			return err
		}

		want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: v6}, {Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: "cp-1"}}
		if !slices.Equal(n.Status.Addresses, want) {
			return fmt.Errorf("addresses %v, want %v", n.Status.Addresses, want)
		}

		if len(n.Spec.PodCIDRs) != 2 || !strings.HasPrefix(n.Spec.PodCIDRs[0], "fd00:10:244:") {
			return fmt.Errorf("pod CIDRs %v", n.Spec.PodCIDRs)
		}

		return nil
	})

	eventually(t, 30*time.Second, "the kube-apiserver mirror pod's host IPs", func() error {
		p, err := kc.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-cp-1", metav1.GetOptions{})
		if err != nil {
			return err
		}

		if want := []corev1.HostIP{{IP: v6}, {IP: ip}}; !slices.Equal(p.Status.HostIPs, want) || p.Status.HostIP != v6 {
			return fmt.Errorf("host IPs %v (%s), want %v", p.Status.HostIPs, p.Status.HostIP, want)
		}

		return nil
	})

	// The `kubernetes` service's endpoints: the advertised address, the control plane's IPv6 one.
	eventually(t, 30*time.Second, "the kubernetes endpoints", func() error {
		list, err := kc.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
		if err != nil {
			return err
		}

		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if slices.Contains(e.Addresses, v6) {
					return nil
				}
			}
		}

		return fmt.Errorf("endpoint slices %v", list.Items)
	})

	// A pod off the host network gets one IP of each of the node's pod CIDRs, IPv6 first.
	eventually(t, 90*time.Second, "a CoreDNS pod's IPs", func() error {
		pods, err := kc.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return err
		}

		for _, p := range pods.Items {
			if len(p.Status.PodIPs) == 2 && strings.HasPrefix(p.Status.PodIPs[0].IP, "fd00:10:244:") && strings.HasPrefix(p.Status.PodIPs[1].IP, "10.244.") {
				return nil
			}
		}

		return fmt.Errorf("pods %v", pods.Items)
	})

	if _, err := kc.CoreV1().Nodes().Get(ctx, "w-1", metav1.GetOptions{}); err == nil {
		t.Fatal("a worker without a node IP in its validSubnets registered")
	}
}
