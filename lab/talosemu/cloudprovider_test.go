package talosemu_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// What the provider configures for the Proxmox cloud controller manager, against a real API
// server: a worker whose kubelet gets --provider-id and --cloud-provider=external through
// machine.kubelet.extraArgs and whose machine.nodeLabels name its region and zone registers its
// Node with that providerID, the uninitialized taint (which stays: no cloud controller manager
// runs in the lab) and the topology labels; the API server refuses to change the providerID
// afterwards. The control plane, configured without them, has neither.
func TestKubeletExternalCloudProvider(t *testing.T) {
	t.Parallel()

	cluster := kubeCluster(t)
	endpoint := nextHost()
	patch := fmt.Sprintf("cluster:\n  controlPlane:\n    endpoint: https://%s:6443\n", endpoint)
	ccm := `machine:
  kubelet:
    extraArgs:
      cloud-provider: external
      provider-id: proxmox://lab/104
  nodeLabels:
    topology.kubernetes.io/region: lab
    topology.kubernetes.io/zone: pve2
`

	cp := startNode(t, talosemu.Options{Cluster: cluster, TalosVersion: "v1.13.9"})
	install(t, cp, machineConfig(t, machine.TypeControlPlane, "cp-1", patch))

	w := startNode(t, talosemu.Options{Cluster: cluster, TalosVersion: "v1.13.9"})
	install(t, w, machineConfig(t, machine.TypeWorker, "w-1", patch, ccm))

	if err := secureClient(t, cp).Bootstrap(nodeCtx(t, cp), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	waitStateFor(t, cp, 30*time.Second, talosemu.StateBootstrapped)

	kc := clientFromTalos(t, cp)
	ctx := t.Context()

	var node *corev1.Node

	eventually(t, 90*time.Second, "w-1 registered with its labels and its first status", func() error {
		n, err := kc.CoreV1().Nodes().Get(ctx, "w-1", metav1.GetOptions{})
		if err != nil {
			return err
		}

		if n.Labels["topology.kubernetes.io/region"] != "lab" || n.Labels["topology.kubernetes.io/zone"] != "pve2" {
			return fmt.Errorf("labels %v", n.Labels)
		}

		// posted with the first status, after the registration
		if got := n.Annotations["alpha.kubernetes.io/provided-node-ip"]; got != w.IP() {
			return fmt.Errorf("provided-node-ip %q, want %s", got, w.IP())
		}

		node = n

		return nil
	})

	uninitialized := corev1.Taint{Key: kubeletemu.UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	hasTaint := func(n *corev1.Node) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.MatchTaint(&uninitialized) && tn.Value == "true" })
	}

	if node.Spec.ProviderID != "proxmox://lab/104" || !hasTaint(node) {
		t.Fatalf("w-1: providerID %q, taints %v", node.Spec.ProviderID, node.Spec.Taints)
	}

	// a patch, not an update: heartbeats keep changing the Node's resourceVersion
	change := []byte(`{"spec":{"providerID":"proxmox://lab/999"}}`)
	if _, err := kc.CoreV1().Nodes().Patch(ctx, "w-1", types.MergePatchType, change, metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing the providerID: %v, want the API server's refusal", err)
	}

	eventually(t, 60*time.Second, "cp-1 registered", func() error {
		n, err := kc.CoreV1().Nodes().Get(ctx, "cp-1", metav1.GetOptions{})
		if err == nil && (n.Spec.ProviderID != "" || hasTaint(n)) {
			t.Fatalf("cp-1: providerID %q, taints %v", n.Spec.ProviderID, n.Spec.Taints)
		}

		return err
	})

	// Heartbeats go on without touching what the kubelet registered.
	time.Sleep(3 * time.Second)

	if n, err := kc.CoreV1().Nodes().Get(ctx, "w-1", metav1.GetOptions{}); err != nil || n.Spec.ProviderID != "proxmox://lab/104" || !hasTaint(n) {
		t.Fatalf("w-1 later: %v, providerID %q, taints %v", err, n.Spec.ProviderID, n.Spec.Taints)
	}
}
