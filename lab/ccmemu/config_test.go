package ccmemu_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/ccmemu"
)

// CloudConfigSecret follows --cloud-config through the container's mounts to the Secret key
// behind it, as the kubelet mounts it, and says why when there is none.
func TestCloudConfigSecret(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name  string
		edit  func(*corev1.Pod)
		want  string
		error string
	}{
		{name: "items", want: "kube-system/proxmox-ccm/config.yaml"},
		{name: "other key", want: "kube-system/proxmox-ccm/cloud.yaml", edit: func(p *corev1.Pod) {
			p.Spec.Volumes[0].Secret.Items[0].Key = "cloud.yaml"
		}},
		{name: "whole secret", want: "kube-system/proxmox-ccm/config.yaml", edit: func(p *corev1.Pod) {
			p.Spec.Volumes[0].Secret.Items = nil
		}},
		{name: "subPath", want: "kube-system/proxmox-ccm/cloud.yaml", edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts[0].MountPath = "/etc/proxmox/config.yaml"
			p.Spec.Containers[0].VolumeMounts[0].SubPath = "cloud.yaml"
			p.Spec.Volumes[0].Secret.Items = nil
		}},
		{name: "no flag", error: "no --cloud-config", edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = p.Spec.Containers[0].Args[:2]
		}},
		{name: "item elsewhere", error: "projects no such key", edit: func(p *corev1.Pod) {
			p.Spec.Volumes[0].Secret.Items[0].Path = "other.yaml"
		}},
		{name: "not mounted", error: "no secret volume mounted there", edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts[0].MountPath = "/etc/other"
		}},
		{name: "no volume", error: `the pod has no volume "cloud-config"`, edit: func(p *corev1.Pod) {
			p.Spec.Volumes = nil
		}},
	} {
		pod := ccmPod("cp-1")
		if tc.edit != nil {
			tc.edit(pod)
		}

		ns, secret, key, err := ccmemu.CloudConfigSecret(pod, pod.Spec.Containers[0])
		if got := ns + "/" + secret + "/" + key; tc.error == "" && (err != nil || got != tc.want) {
			t.Errorf("%s: %s, %v; want %s", tc.name, got, err, tc.want)
		}

		if tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.error)
		}
	}
}
