package day2

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretstest"
)

// TestSyncWorkerNode: a worker's Node gets the labels and taints its configuration declares, on
// both contract families, with Talos' owned annotations: a taint it set before and no longer
// declares goes, one someone else set with another value stays, and a Node not registered yet is
// left to its registration.
func TestSyncWorkerNode(t *testing.T) {
	t.Parallel()

	patches := map[string]string{
		"v1.11": "machine:\n  nodeLabels: {pool: gpu}\n  nodeTaints: {dedicated: \"gpu:NoExecute\", nvidia.com/gpu: NoSchedule}\n",
		"v1.14": "apiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels: {pool: gpu}\ntaints: {dedicated: \"gpu:NoExecute\", nvidia.com/gpu: NoSchedule}\n",
	}

	for contract, patch := range patches {
		cfg, err := machineconfig.Generate(machineconfig.Request{
			ClusterName: "lab", Endpoint: "https://10.0.0.10:6443", KubernetesVersion: "v1.34.1", Contract: contract,
			Secrets: machineconfig.SecretsFrom(secretstest.Bundle()), Patches: []machineconfig.Patch{{From: "test", Text: patch}},
		})
		if err != nil {
			t.Fatal(err)
		}

		kube := fake.NewClientset(&corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "w-1", Labels: map[string]string{"pool": "storage", "extensions.talos.dev/qemu-guest-agent": "10.0.2"}, Annotations: map[string]string{
				"talos.dev/owned-labels": `["extensions.talos.dev/qemu-guest-agent","pool"]`, "talos.dev/owned-taints": `["dedicated","example.com/old"]`,
			}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{
				{Key: "dedicated", Value: "storage", Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/old", Effect: corev1.TaintEffectNoSchedule},
				{Key: "nvidia.com/gpu", Value: "theirs", Effect: corev1.TaintEffectNoSchedule},
			}},
		})

		if err := SyncWorkerNode(t.Context(), kube, "w-1", cfg, 10*time.Second, nil); err != nil {
			t.Fatalf("%s: %v", contract, err)
		}

		n, _ := kube.CoreV1().Nodes().Get(t.Context(), "w-1", metav1.GetOptions{})

		var taints []string
		for _, tn := range n.Spec.Taints {
			taints = append(taints, tn.Key+"="+tn.Value+":"+string(tn.Effect))
		}

		if want := []string{"dedicated=gpu:NoExecute", "nvidia.com/gpu=theirs:NoSchedule"}; !slices.Equal(taints, want) {
			t.Errorf("%s: taints %v, want %v", contract, taints, want)
		}

		if n.Labels["pool"] != "gpu" || n.Labels["extensions.talos.dev/qemu-guest-agent"] != "10.0.2" ||
			n.Annotations["talos.dev/owned-labels"] != `["extensions.talos.dev/qemu-guest-agent","pool"]` || n.Annotations["talos.dev/owned-taints"] != `["dedicated"]` {
			t.Errorf("%s: labels %v, annotations %v", contract, n.Labels, n.Annotations)
		}

		if err := SyncWorkerNode(t.Context(), kube, "w-2", cfg, 10*time.Second, nil); err != nil {
			t.Errorf("%s: a Node not registered yet: %v", contract, err)
		}
	}
}
