package chartrepo

import (
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/ccmemu"
)

// podOf is the pod a workload's template makes in namespace.
func podOf(namespace string, spec corev1.PodSpec) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: namespace}, Spec: spec}
}

// cloudConfigOf is where ccmemu reads the cloud config of pod's first container from.
func cloudConfigOf(t *testing.T, pod *corev1.Pod) string {
	t.Helper()

	ns, secret, key, err := ccmemu.CloudConfigSecret(pod, pod.Spec.Containers[0])
	if err != nil {
		t.Fatalf("cloud config of %s: %v", pod.Spec.Containers[0].Name, err)
	}

	return ns + "/" + secret + "/" + key
}

// The CSI plugin's stand-in chart with the values the component sets (provider/internal/spec):
// exactly upstream's objects for them, in the plugin's own privileged namespace, the controller
// reading the component's Secret.
func TestProxmoxCSIChartComponentValues(t *testing.T) {
	t.Parallel()

	ch, _ := loadArchive(t, ProxmoxCSIArchive)
	objs := render(t, ch, "csi-proxmox", map[string]any{
		"createNamespace": true, "existingConfigSecret": "talos-proxmox-csi", "existingConfigSecretKey": "config.yaml",
		"storageClass": []any{map[string]any{
			"name": "fast", "storage": "local-lvm", "reclaimPolicy": "Delete", "fstype": "ext4",
			"annotations": map[string]any{"storageclass.kubernetes.io/is-default-class": "true"},
		}},
		"nodeSelector": map[string]any{"node-role.kubernetes.io/control-plane": ""},
		"tolerations":  []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}},
		"node":         map[string]any{"tolerations": []any{map[string]any{"operator": "Exists"}}},
		"controller":   map[string]any{"podAnnotations": map[string]any{"talos-proxmox.dev/proxmox-token": "talos-lab-csi@pve!csi"}},
		// The chart's own config, which an existing Secret overrides.
		"config": map[string]any{"clusters": []any{labCluster}},
	})

	want := []string{
		"CSIDriver/csi.proxmox.sinextra.dev", "ClusterRole/proxmox-csi-plugin-controller", "ClusterRole/proxmox-csi-plugin-node",
		"ClusterRoleBinding/proxmox-csi-plugin-controller", "ClusterRoleBinding/proxmox-csi-plugin-node",
		"DaemonSet/proxmox-csi-plugin-node", "Deployment/proxmox-csi-plugin-controller", "Namespace/csi-proxmox",
		"Role/proxmox-csi-plugin-controller", "RoleBinding/proxmox-csi-plugin-controller",
		"ServiceAccount/proxmox-csi-plugin-controller", "ServiceAccount/proxmox-csi-plugin-node", "StorageClass/fast",
	}
	if got := slices.Sorted(maps.Keys(objs)); !slices.Equal(got, want) {
		t.Fatalf("objects:\n%v\nwant:\n%v", got, want)
	}

	if l := objs["Namespace/csi-proxmox"].Metadata.Labels; l["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("Namespace labels %v", l)
	}

	sc := decodeAs[storagev1.StorageClass](t, objs, "StorageClass/fast")
	if sc.Provisioner != csiDriver || sc.Parameters["storage"] != "local-lvm" || sc.Parameters["csi.storage.k8s.io/fstype"] != "ext4" ||
		sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("StorageClass fast: %+v", sc)
	}

	ctrl := decodeAs[appsv1.Deployment](t, objs, "Deployment/proxmox-csi-plugin-controller")
	spec := ctrl.Spec.Template.Spec

	if src := cloudConfigOf(t, podOf("csi-proxmox", spec)); src != "csi-proxmox/talos-proxmox-csi/config.yaml" {
		t.Errorf("the controller reads its cloud config from %s", src)
	}

	var images []string
	for _, c := range spec.Containers {
		images = append(images, c.Image)
	}

	if !slices.Equal(images, []string{
		"ghcr.io/sergelogvinov/proxmox-csi-controller:v0.19.1", "registry.k8s.io/sig-storage/csi-attacher:v4.10.0",
		"registry.k8s.io/sig-storage/csi-provisioner:v5.3.0", "registry.k8s.io/sig-storage/csi-resizer:v1.14.0",
	}) {
		t.Errorf("controller images %v", images)
	}

	if ctrl.Spec.Template.Annotations["talos-proxmox.dev/proxmox-token"] != "talos-lab-csi@pve!csi" || spec.ServiceAccountName != "proxmox-csi-plugin-controller" ||
		len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "node-role.kubernetes.io/control-plane" ||
		!maps.Equal(spec.NodeSelector, map[string]string{"node-role.kubernetes.io/control-plane": ""}) {
		t.Errorf("controller pod: %+v %+v", ctrl.Spec.Template.Annotations, spec)
	}

	node := decodeAs[appsv1.DaemonSet](t, objs, "DaemonSet/proxmox-csi-plugin-node")
	if s := node.Spec.Template.Spec; len(s.Containers) != 2 || s.Containers[0].Image != "ghcr.io/sergelogvinov/proxmox-csi-node:v0.19.1" ||
		s.Containers[1].Image != "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.15.0" ||
		len(s.Tolerations) != 1 || s.Tolerations[0].Operator != corev1.TolerationOpExists || s.ServiceAccountName != "proxmox-csi-plugin-node" {
		t.Errorf("node DaemonSet: %+v", s)
	}

	role := decodeAs[rbacv1.Role](t, objs, "Role/proxmox-csi-plugin-controller")
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "leases") }) {
		t.Errorf("controller Role: %+v", role.Rules)
	}
}

// csiDriver is the CSI driver name the stand-in chart defaults to.
const csiDriver = "csi.proxmox.sinextra.dev"

// ccmArgs are the upstream chart's arguments of the CCM's container with its default controllers.
var ccmArgs = []string{
	"--v=2", "--cloud-provider=proxmox", "--cloud-config=/etc/proxmox/config.yaml", "--controllers=cloud-node,cloud-node-lifecycle",
	"--leader-elect-resource-name=cloud-controller-manager-proxmox", "--use-service-account-credentials", "--secure-port=10258",
	"--authorization-always-allow-paths=/healthz,/livez,/readyz,/metrics",
}

func TestProxmoxCCMChartRenders(t *testing.T) {
	t.Parallel()

	ch, _ := loadArchive(t, ProxmoxCCMArchive)
	if ch.Metadata.Name != ProxmoxCCMChart || ch.Metadata.Version != ProxmoxCCMVersion || ch.Metadata.AppVersion != ProxmoxCCMAppVersion {
		t.Fatalf("chart %s %s (app %s)", ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion)
	}

	values := map[string]any{"config": map[string]any{"clusters": []any{labCluster}}}
	objs := render(t, ch, "kube-system", values)

	dep := decodeAs[appsv1.Deployment](t, objs, "Deployment/proxmox-cloud-controller-manager")
	if c := dep.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != ccmemu.Image+":"+ProxmoxCCMAppVersion || !slices.Equal(c[0].Args, ccmArgs) {
		t.Fatalf("Deployment: %+v", dep.Spec.Template.Spec)
	}

	if src := cloudConfigOf(t, podOf("kube-system", dep.Spec.Template.Spec)); src != "kube-system/proxmox-cloud-controller-manager/config.yaml" {
		t.Errorf("the CCM reads its cloud config from %s", src)
	}

	if tol := dep.Spec.Template.Spec.Tolerations; !slices.ContainsFunc(tol, func(t corev1.Toleration) bool {
		return t.Key == ccmemu.UninitializedTaint && t.Operator == corev1.TolerationOpExists && t.Effect == corev1.TaintEffectNoSchedule
	}) || !slices.ContainsFunc(tol, func(t corev1.Toleration) bool { return t.Key == "node-role.kubernetes.io/control-plane" }) {
		t.Errorf("tolerations %+v", tol)
	}

	checkConfigSecret(t, objs["Secret/proxmox-cloud-controller-manager"])

	values["useDaemonSet"] = true
	values["enabledControllers"] = []any{"cloud-node"}

	objs = render(t, ch, "kube-system", values)
	if _, ok := objs["Deployment/proxmox-cloud-controller-manager"]; ok {
		t.Fatal("useDaemonSet renders a Deployment")
	}

	ds := decodeAs[appsv1.DaemonSet](t, objs, "DaemonSet/proxmox-cloud-controller-manager")
	if args := ds.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--controllers=cloud-node") {
		t.Errorf("DaemonSet args %v", args)
	}
}

// The CCM's stand-in chart with the values the component sets: the objects of upstream's chart,
// and a pod ccmemu (which the lab's kubelets run for its image) reads the component's Secret from.
func TestProxmoxCCMChartComponentValues(t *testing.T) {
	t.Parallel()

	ch, _ := loadArchive(t, ProxmoxCCMArchive)
	affinity := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
			map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
		}}},
	}}}
	objs := render(t, ch, "kube-system", map[string]any{
		"existingConfigSecret": "talos-proxmox-ccm", "existingConfigSecretKey": "config.yaml", "affinity": affinity,
		"podAnnotations": map[string]any{"talos-proxmox.dev/proxmox-token": "talos-lab-ccm@pve!ccm"},
	})

	want := []string{
		"ClusterRole/system:proxmox-cloud-controller-manager", "ClusterRoleBinding/system:proxmox-cloud-controller-manager",
		"Deployment/proxmox-cloud-controller-manager",
		"RoleBinding/system:proxmox-cloud-controller-manager:extension-apiserver-authentication-reader",
		"ServiceAccount/proxmox-cloud-controller-manager",
	}
	if got := slices.Sorted(maps.Keys(objs)); !slices.Equal(got, want) {
		t.Fatalf("objects:\n%v\nwant:\n%v", got, want)
	}

	rb := decodeAs[rbacv1.RoleBinding](t, objs, "RoleBinding/system:proxmox-cloud-controller-manager:extension-apiserver-authentication-reader")
	if rb.Namespace != "kube-system" || rb.RoleRef.Name != "extension-apiserver-authentication-reader" || rb.Subjects[0].Name != "proxmox-cloud-controller-manager" {
		t.Errorf("RoleBinding %+v", rb)
	}

	dep := decodeAs[appsv1.Deployment](t, objs, "Deployment/proxmox-cloud-controller-manager")
	spec := dep.Spec.Template.Spec
	pod := podOf(dep.Namespace, spec)

	if repo, _, _ := strings.Cut(spec.Containers[0].Image, ":"+ProxmoxCCMAppVersion); repo != ccmemu.Image || !spec.HostNetwork {
		t.Errorf("CCM container %s (host network %v): the lab's kubelets run ccmemu for image %s", spec.Containers[0].Image, spec.HostNetwork, ccmemu.Image)
	}

	if src := cloudConfigOf(t, pod); src != "kube-system/talos-proxmox-ccm/config.yaml" {
		t.Errorf("ccmemu reads the cloud config from %s, want kube-system/talos-proxmox-ccm/config.yaml", src)
	}

	if !slices.Equal(spec.Containers[0].Args, ccmArgs) || dep.Spec.Template.Annotations["talos-proxmox.dev/proxmox-token"] != "talos-lab-ccm@pve!ccm" ||
		spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.PodAntiAffinity != nil {
		t.Errorf("CCM pod: %+v %+v", dep.Spec.Template.Annotations, spec)
	}

	// Another key of the Secret is projected to the file --cloud-config names.
	objs = render(t, ch, "kube-system", map[string]any{"existingConfigSecret": "ccm", "existingConfigSecretKey": "cloud.yaml"})
	dep = decodeAs[appsv1.Deployment](t, objs, "Deployment/proxmox-cloud-controller-manager")

	if src := cloudConfigOf(t, podOf("kube-system", dep.Spec.Template.Spec)); src != "kube-system/ccm/cloud.yaml" {
		t.Errorf("with existingConfigSecretKey cloud.yaml, ccmemu reads %s", src)
	}
}
