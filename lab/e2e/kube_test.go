//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// kubernetesFromOutput uses the stack's kubeconfig output with client-go, unchanged, against the
// lab's real API server: every node registers and turns Ready once the CNI the program installs
// (Cilium, rendered into the bootstrap manifests) runs on it.
func kubernetesFromOutput(t *testing.T, kubeconfig string, nodes int) {
	t.Helper()

	rc, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		t.Fatalf("the kubeconfig output does not load: %v", err)
	}

	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}

	var last error

	start := time.Now()
	for deadline := start.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if last = readyNodes(t.Context(), kc, nodes); last == nil {
			t.Logf("all %d nodes Ready %s after up", nodes, time.Since(start).Round(time.Second))

			return
		}
	}

	t.Fatalf("Kubernetes through the kubeconfig output: %v", last)
}

func readyNodes(ctx context.Context, kc kubernetes.Interface, want int) error {
	list, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}

	ready := 0

	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}

	if ready != want {
		return fmt.Errorf("%d of %d nodes registered, %d Ready", len(list.Items), want, ready)
	}

	return nil
}
