package talosemu

import (
	"testing"
)

// The kubelet's cloud-provider settings as the emulator reads them, on the v1alpha1 contracts
// (machine.kubelet.extraArgs and extraConfig, machine.nodeLabels, cluster.externalCloudProvider)
// and on contract 1.14 (the KubeletConfig and KubeNodeConfig documents).
func TestKubeletCloudProviderSettingsFromEveryContract(t *testing.T) {
	t.Parallel()

	type want struct {
		providerID string
		external   bool
		region     string
	}

	const (
		legacyArgs = `machine:
  kubelet:
    extraArgs:
      provider-id: proxmox://lab/104
      cloud-provider: external
  nodeLabels:
    topology.kubernetes.io/region: lab
    topology.kubernetes.io/zone: pve1
`
		docArgs = `apiVersion: v1alpha1
kind: KubeletConfig
extraArgs:
  provider-id: proxmox://lab/104
  cloud-provider: external
---
apiVersion: v1alpha1
kind: KubeNodeConfig
labels:
  topology.kubernetes.io/region: lab
  topology.kubernetes.io/zone: pve1
`
		externalCCM = "cluster:\n  externalCloudProvider:\n    enabled: true\n"
	)

	contract := func(legacy, doc string) func(string) string {
		return func(v string) string {
			if v == "v1.14.1" {
				return doc
			}

			return legacy
		}
	}

	cases := []struct {
		name     string
		versions []string
		patch    func(version string) string
		want     want
	}{
		{"none", []string{"v1.11.5", "v1.13.0", "v1.14.1"}, contract("", ""), want{}},
		{"extraArgs", []string{"v1.11.5", "v1.13.0", "v1.14.1"}, contract(legacyArgs, docArgs), want{"proxmox://lab/104", true, "lab"}},
		// the kubelet configuration file's providerID
		{"extraConfig", []string{"v1.11.5", "v1.14.1"}, contract(
			"machine:\n  kubelet:\n    extraConfig:\n      providerID: proxmox://lab/105\n",
			"apiVersion: v1alpha1\nkind: KubeletConfig\nconfig:\n  providerID: proxmox://lab/105\n",
		), want{"proxmox://lab/105", false, ""}},
		// a flag wins over the configuration file
		{"flag over config", []string{"v1.13.0"}, contract(
			"machine:\n  kubelet:\n    extraArgs:\n      provider-id: proxmox://lab/106\n    extraConfig:\n      providerID: proxmox://lab/105\n", "",
		), want{"proxmox://lab/106", false, ""}},
		// Talos adds --cloud-provider=external for cluster.externalCloudProvider; extraArgs override it
		{"externalCloudProvider", []string{"v1.11.5", "v1.13.0"}, contract(externalCCM, ""), want{"", true, ""}},
		{"externalCloudProvider overridden", []string{"v1.13.0"}, contract(
			externalCCM+"machine:\n  kubelet:\n    extraArgs:\n      cloud-provider: \"\"\n", "",
		), want{"", false, ""}},
	}

	for _, tc := range cases {
		for _, v := range tc.versions {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				t.Parallel()

				cfg, _ := factsConfig(t, v)
				if p := tc.patch(v); p != "" {
					cfg = controlPlaneConfig(t, v, p)
				}

				got := want{kubeletProviderID(cfg), kubeletExternalCloudProvider(cfg), nodeLabels(cfg)["topology.kubernetes.io/region"]}
				if got != tc.want {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}

				if tc.want.region != "" && nodeLabels(cfg)["topology.kubernetes.io/zone"] != "pve1" {
					t.Errorf("node labels %v", nodeLabels(cfg))
				}
			})
		}
	}
}
