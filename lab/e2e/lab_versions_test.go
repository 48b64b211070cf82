//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// versionCluster: a control plane behind a VIP and a worker with a Longhorn data disk, Cilium
// from the lab's repository, on one Talos release.
func versionCluster(l *lab.Lab, talos string) string {
	// Up to v1.12 the data disk is mounted where Longhorn expects it by default (machine.disks);
	// from v1.13 at /var/mnt as a user volume (from contract v1.14 the only way).
	mount := "/var/lib/longhorn"
	if talos >= "v1.13" {
		mount = "/var/mnt/longhorn"
	}

	return fmt.Sprintf(`name: versions
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  versions:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: versions
      talosVersion: %[1]s
      vip: %[3]s
      network:
        gateway: %[4]s
        nameservers: [1.1.1.1]
        ntpServers: [time.cloudflare.com]
      image:
        factoryUrl: ${factoryUrl}
      cilium:
        version: 1.18.0
        repository: %[2]s
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[5]s}
        worker-1:
          hostNode: pve2
          role: worker
          ip: %[6]s
          dataDisks: [{sizeGib: 20, mountPath: %[7]s}]
outputs:
  endpoint: ${versions.endpoint}
  kubeconfig: ${versions.kubeconfig}
`, talos, l.Charts.URL, l.Address(10), l.Address(1), l.Address(11), l.Address(21), mount)
}

// TestTalosVersionMatrix creates the same small cluster on the newest patch of every supported
// Talos minor the lab's nodes emulate, each with the configuration documents of its contract,
// which the emulated nodes validate with machinery v1.14.1 in the mode of their own version: up,
// a preview without changes, destroy. On v1.14 (Kubernetes in Kube* documents) Kubernetes is
// also upgraded, v1.36.3 → v1.37.0, patching those documents.
func TestTalosVersionMatrix(t *testing.T) {
	t.Parallel()

	network := []string{"HostnameConfig", "LinkAliasConfig", "LinkConfig", "ResolverConfig", "TimeSyncConfig"}
	kube := append(slices.Clone(network), "UnattendedInstallConfig", "KubeNodeConfig", "KubeNetworkConfig", "KubeletConfig")

	for i, tc := range []struct {
		talos string
		// documents every node has (besides v1alpha1), and those of one role only
		docs, cpDocs, workerDocs []string
	}{
		{"v1.11.5", nil, nil, nil},
		{"v1.12.4", network, []string{"Layer2VIPConfig"}, nil},
		{"v1.13.9", network, []string{"Layer2VIPConfig"}, []string{"UserVolumeConfig"}},
		{"v1.14.1", kube, []string{"Layer2VIPConfig", "KubeAPIServerConfig", "KubeInlineManifestConfig", "KubeProxyConfig"}, []string{"UserVolumeConfig"}},
	} {
		t.Run(tc.talos, func(t *testing.T) {
			t.Parallel()

			e := newEnv(t)
			upgradeKube := strings.HasPrefix(tc.talos, "v1.14.")
			l, p := onLab(t, e, lab.Options{Subnet: 50 + i}, func(l *lab.Lab) string {
				if upgradeKube {
					return strings.Replace(versionCluster(l, tc.talos), "      vip:", "      kubernetesVersion: v1.36.3\n      vip:", 1)
				}

				return versionCluster(l, tc.talos)
			})

			mustRun(t, p, "up", "--yes", "--skip-preview")

			nodes := l.Controller.Nodes()
			if len(nodes) != 2 {
				t.Fatalf("%d nodes, want 2", len(nodes))
			}

			for _, n := range nodes {
				cfg, err := configloader.NewFromBytes(n.Config())
				if err != nil {
					t.Fatalf("%s: the applied configuration: %v", n.Hostname(), err)
				}

				var kinds []string
				for _, d := range cfg.Documents() {
					if d.Kind() != "v1alpha1" {
						kinds = append(kinds, d.Kind())
					}
				}

				want := slices.Clone(tc.docs)
				if n.Hostname() == "cp-1" {
					want = append(want, tc.cpDocs...)
				} else {
					want = append(want, tc.workerDocs...)
				}

				if len(want) == 0 && len(kinds) != 0 {
					t.Errorf("%s on Talos %s: documents %v beside v1alpha1; contract v1.11 has one document", n.Hostname(), tc.talos, kinds)
				}

				for _, k := range want {
					if !slices.Contains(kinds, k) {
						t.Errorf("%s on Talos %s: no %s document among %v", n.Hostname(), tc.talos, k, kinds)
					}
				}

				if tc.talos < "v1.14" && slices.Contains(kinds, "KubeletConfig") {
					t.Errorf("%s on Talos %s: Kube* documents before contract v1.14: %v", n.Hostname(), tc.talos, kinds)
				}
			}

			mustRun(t, p, "preview", "--expect-no-changes")

			if upgradeKube {
				editProgram(t, e, "kubernetesVersion: v1.36.3", "kubernetesVersion: v1.37.0")
				mustRun(t, p, "up", "--yes", "--skip-preview")

				for _, n := range l.Controller.Nodes() {
					cfg, err := configloader.NewFromBytes(n.Config())
					if err != nil {
						t.Fatal(err)
					}

					if img := cfg.K8sKubeletConfig().Image(); !strings.HasSuffix(img, ":v1.37.0") {
						t.Errorf("%s: kubelet image %s after the Kubernetes upgrade", n.Hostname(), img)
					}

					if a := cfg.K8sAPIServerConfig(); n.Hostname() == "cp-1" && !strings.HasSuffix(a.Image(), ":v1.37.0") {
						t.Errorf("cp-1: kube-apiserver image %s after the Kubernetes upgrade", a.Image())
					}
				}

				mustRun(t, p, "preview", "--expect-no-changes")
			}

			mustRun(t, p, "destroy", "--yes", "--skip-preview")

			if vms := l.PVE.VMs(); len(vms) != 0 {
				t.Errorf("%d VMs left after destroy", len(vms))
			}
		})
	}
}

// TestUpgradeAcrossMinors upgrades a cluster created on Talos v1.11 through every newer minor
// (v1.12.4, v1.13.9, v1.14.1): each step reboots every node into the new version through the API
// its running version serves (the legacy MachineService.Upgrade up to v1.12, ImageService +
// LifecycleService from v1.13; the emulated nodes refuse the other), and the configuration keeps
// the contract the cluster was created with (one v1alpha1 document).
//
// With kubernetesVersion unset Kubernetes keeps the version the cluster runs, where every Talos
// minor's default is newer: v1.34.1, recorded at creation (the default of v1.11), through the
// upgrade to v1.12; then kubernetesVersion v1.35.0 is set (a Kubernetes upgrade) and unset again,
// and v1.35.0 stays through v1.13 and v1.14. After every `up` the configurations, the API
// server's Nodes and its kube-apiserver pod say the version, and no Talos upgrade's preview shows
// a Kubernetes upgrade. Last, a Talos v1.11 (which does not run v1.35) is refused at preview,
// naming talosVersion and what to do, and changes nothing.
func TestUpgradeAcrossMinors(t *testing.T) {
	t.Parallel()

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 54}, func(l *lab.Lab) string { return versionCluster(l, "v1.11.5") })

	mustRun(t, p, "up", "--yes", "--skip-preview")
	runsKubernetes(t, p, l, "v1.34.1")

	upgrade := func(from, to, kube string) {
		t.Helper()

		setTalosVersion(t, e, from, to)

		if got := previewUpdates(t, p, nodeUpgradeType); len(got) != 2 {
			t.Errorf("%s → %s: the preview shows node upgrades %v, want both nodes", from, to, got)
		}

		if got := previewUpdates(t, p, kubernetesUpgradeType); len(got) != 0 {
			t.Errorf("%s → %s with kubernetesVersion unset: the preview shows a Kubernetes upgrade %v", from, to, got)
		}

		mustRun(t, p, "up", "--yes", "--skip-preview")

		for name, n := range labNodes(t, l) {
			if v := n.Running().Version; v != to {
				t.Errorf("%s → %s: %s runs %s", from, to, name, v)
			}

			cfg, err := configloader.NewFromBytes(n.Config())
			if err != nil {
				t.Fatal(err)
			}

			if docs := len(cfg.Documents()); docs != 1 {
				t.Errorf("%s on %s: %d documents; the cluster keeps contract v1.11 (one document)", name, to, docs)
			}
		}

		runsKubernetes(t, p, l, kube)
		mustRun(t, p, "preview", "--expect-no-changes")
	}

	upgrade("v1.11.5", "v1.12.4", "v1.34.1")

	editProgram(t, e, "      vip:", "      kubernetesVersion: v1.35.0\n      vip:")

	if got := previewUpdates(t, p, kubernetesUpgradeType); !slices.Equal(got, []string{"update versions-kubernetes"}) {
		t.Errorf("kubernetesVersion v1.35.0: the preview shows Kubernetes upgrades %v, want [update versions-kubernetes]", got)
	}

	mustRun(t, p, "up", "--yes", "--skip-preview")
	runsKubernetes(t, p, l, "v1.35.0")

	// Unset again: the cluster keeps the version last set.
	editProgram(t, e, "      kubernetesVersion: v1.35.0\n", "")
	upgrade("v1.12.4", "v1.13.9", "v1.35.0")
	upgrade("v1.13.9", "v1.14.1", "v1.35.0")

	setTalosVersion(t, e, "v1.14.1", "v1.11.6")

	out, err := p.Run(t.Context(), "preview")
	for _, want := range []string{
		"talosVersion: Talos v1.11 does not support Kubernetes v1.35.0, which this cluster runs (Talos v1.11 runs v1.29 to v1.34)",
		"keep talosVersion on a Talos minor that runs v1.35 (v1.12 to v1.14)",
	} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("Talos v1.11 on Kubernetes v1.35.0: the preview does not refuse it saying %q: %v\n%s", want, err, out)
		}
	}

	t.Logf("the refused preview:\n%s", out)

	setTalosVersion(t, e, "v1.11.6", "v1.14.1")
	mustRun(t, p, "preview", "--expect-no-changes")
}

// kubernetesUpgradeType is the type of the lifecycle resource that upgrades Kubernetes.
const kubernetesUpgradeType = "talos-proxmox:lifecycle:KubernetesUpgrade"

// runsKubernetes checks that the cluster runs Kubernetes version everywhere the lab shows it:
// every node's applied configuration (its kubelet image, and the control plane's kube-apiserver
// image), and the real API server's Nodes (each emulated kubelet reports the version of its
// configuration's kubelet image) and cp-1's kube-apiserver mirror pod.
func runsKubernetes(t *testing.T, p *lab.Pulumi, l *lab.Lab, version string) {
	t.Helper()

	for name, n := range labNodes(t, l) {
		cfg, err := configloader.NewFromBytes(n.Config())
		if err != nil {
			t.Fatal(err)
		}

		if img := cfg.K8sKubeletConfig().Image(); !strings.HasSuffix(img, ":"+version) {
			t.Errorf("%s: the configuration's kubelet image is %s, want %s", name, img, version)
		}

		if img := cfg.K8sAPIServerConfig().Image(); name == "cp-1" && !strings.HasSuffix(img, ":"+version) {
			t.Errorf("cp-1: the configuration's kube-apiserver image is %s, want %s", img, version)
		}
	}

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))

	nodes, err := kc.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if len(nodes.Items) != 2 {
		t.Errorf("%d Nodes, want 2", len(nodes.Items))
	}

	for _, n := range nodes.Items {
		if v := n.Status.NodeInfo.KubeletVersion; v != version {
			t.Errorf("Node %s reports kubelet %s, want %s", n.Name, v, version)
		}
	}

	pod, err := kc.CoreV1().Pods("kube-system").Get(t.Context(), "kube-apiserver-cp-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	if img := pod.Spec.Containers[0].Image; img != "registry.k8s.io/kube-apiserver:"+version {
		t.Errorf("kube-apiserver on cp-1 runs %s, want %s", img, version)
	}
}
