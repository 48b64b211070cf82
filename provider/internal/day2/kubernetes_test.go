package day2

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The new image keeps the registry and repository the node runs (a mirror stays in place) and a
// kubelet's -fat/-slim flavour; Talos' default repository is used when the field is empty.
func TestNextImage(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct{ current, fallback, version, want string }{
		{"", "registry.k8s.io/kube-apiserver", "v1.34.1", "registry.k8s.io/kube-apiserver:v1.34.1"},
		{"registry.k8s.io/kube-apiserver:v1.33.5", "x", "v1.34.1", "registry.k8s.io/kube-apiserver:v1.34.1"},
		{"mirror.lan:5000/k8s/kube-scheduler:v1.33.5", "x", "v1.34.1", "mirror.lan:5000/k8s/kube-scheduler:v1.34.1"},
		{"ghcr.io/siderolabs/kubelet:v1.33.5-fat", "x", "v1.34.1", "ghcr.io/siderolabs/kubelet:v1.34.1-fat"},
		{"ghcr.io/siderolabs/kubelet:v1.33.5@sha256:abc", "x", "v1.34.1", "ghcr.io/siderolabs/kubelet:v1.34.1"},
		{"mirror.lan:5000/kubelet", "x", "v1.34.1", "mirror.lan:5000/kubelet:v1.34.1"},
		{"ghcr.io/siderolabs/kubelet:v1.34.1", "x", "v1.34.1", "ghcr.io/siderolabs/kubelet:v1.34.1"},
	} {
		if got := nextImage(tc.current, tc.fallback, tc.version); got != tc.want {
			t.Errorf("nextImage(%q, %q) = %q, want %q", tc.current, tc.version, got, tc.want)
		}
	}
}

// A cluster without a CNI never has a Ready Node: its kubelet upgrade waits for the version
// only; with Ready required (the default), a NotReady Node keeps it waiting.
func TestKubeletReportsReadyOnlyWhenRequired(t *testing.T) {
	t.Parallel()

	kube := fake.NewClientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w-1"},
		Status: corev1.NodeStatus{
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.35.0"},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "cni plugin not initialized"}},
		},
	})

	if err := kubeletReports(t.Context(), kube, "w-1", "v1.35.0", false); err != nil {
		t.Errorf("without Ready required: %v", err)
	}

	if err := kubeletReports(t.Context(), kube, "w-1", "v1.35.0", true); err == nil || !strings.Contains(err.Error(), "not Ready") {
		t.Errorf("with Ready required: %v", err)
	}

	if err := kubeletReports(t.Context(), kube, "w-1", "v1.36.0", false); err == nil || !strings.Contains(err.Error(), "reports kubelet v1.35.0") {
		t.Errorf("an old kubelet: %v", err)
	}
}
