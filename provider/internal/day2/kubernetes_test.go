package day2

import "testing"

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
