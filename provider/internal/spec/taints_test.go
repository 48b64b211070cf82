package spec

import (
	"strings"
	"testing"
)

// TestNodeRestricted: the labels NodeRestriction refuses a node, as k8s.io/kubelet's
// IsKubeletLabel and the plugin's namespace rule draw the line.
func TestNodeRestricted(t *testing.T) {
	t.Parallel()

	for key, want := range map[string]bool{
		"node-role.kubernetes.io/worker": true, "kubernetes.io/role": true, "example.k8s.io/x": true, "k8s.io/x": true,
		"kubernetes.io/hostname": false, "beta.kubernetes.io/arch": false, "node.kubernetes.io/pool": false,
		"feature.node.kubernetes.io/gpu": false, "a.kubelet.kubernetes.io/b": false, "topology.kubernetes.io/zone": false,
		"example.com/role": false, "pool": false, "notkubernetes.io/x": false,
	} {
		if got := nodeRestricted(key); got != want {
			t.Errorf("%s: restricted %v, want %v", key, got, want)
		}
	}
}

// TestNvidiaNeeds: the NVIDIA preset adds the production pair to an image without a driver, the
// toolkit of the driver's branch to one with a driver only, nothing to one with both, and refuses
// two drivers or mixed branches.
func TestNvidiaNeeds(t *testing.T) {
	t.Parallel()

	cases := []struct {
		exts             []string
		missing, problem string
	}{
		{[]string{"siderolabs/qemu-guest-agent"}, "siderolabs/nonfree-kmod-nvidia-production siderolabs/nvidia-container-toolkit-production", ""},
		{[]string{"siderolabs/nvidia-open-gpu-kernel-modules-lts"}, "siderolabs/nvidia-container-toolkit-lts", ""},
		{[]string{"siderolabs/nonfree-kmod-nvidia-lts", "siderolabs/nvidia-container-toolkit-lts"}, "", ""},
		{[]string{"siderolabs/nonfree-kmod-nvidia-production", "siderolabs/nvidia-open-gpu-kernel-modules-production"}, "", "two NVIDIA drivers"},
		{[]string{"siderolabs/nonfree-kmod-nvidia-lts", "siderolabs/nvidia-container-toolkit-production"}, "", "lts driver"},
	}

	for _, tc := range cases {
		missing, problem := nvidiaNeeds(tc.exts)
		if got := strings.Join(missing, " "); got != tc.missing || (tc.problem == "") != (problem == "") || !strings.Contains(problem, tc.problem) {
			t.Errorf("%v: missing %q, problem %q; want %q, %q", tc.exts, got, problem, tc.missing, tc.problem)
		}
	}
}
