//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// versionCluster: a control plane behind a VIP and a worker with a Longhorn data disk, Cilium
// from the lab's repository, on one Talos release.
func versionCluster(l *lab.Lab, talos string) string {
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
          dataDisks: [{sizeGib: 20, mountPath: /var/lib/longhorn}]
outputs:
  endpoint: ${versions.endpoint}
`, talos, l.Charts.URL, l.Address(10), l.Address(1), l.Address(11), l.Address(21))
}

// TestTalosVersionMatrix creates the same small cluster on the newest patch of every supported
// Talos minor the lab's nodes emulate, each with the configuration documents of its contract
// (v1.14 keeps contract v1.13), which the emulated nodes validate with machinery v1.14.1 in the
// mode of their own version: up, a preview without changes, destroy.
func TestTalosVersionMatrix(t *testing.T) {
	t.Parallel()

	network := []string{"HostnameConfig", "LinkAliasConfig", "LinkConfig", "ResolverConfig", "TimeSyncConfig"}

	for i, tc := range []struct {
		talos string
		// documents every node has (besides v1alpha1), and those of one role only
		docs, cpDocs, workerDocs []string
	}{
		{"v1.11.5", nil, nil, nil},
		{"v1.12.4", network, []string{"Layer2VIPConfig"}, []string{"UserVolumeConfig"}},
		{"v1.13.9", network, []string{"Layer2VIPConfig"}, []string{"UserVolumeConfig"}},
		{"v1.14.1", network, []string{"Layer2VIPConfig"}, []string{"UserVolumeConfig"}},
	} {
		t.Run(tc.talos, func(t *testing.T) {
			t.Parallel()

			e := newEnv(t)
			l, p := onLab(t, e, lab.Options{Subnet: 50 + i}, func(l *lab.Lab) string { return versionCluster(l, tc.talos) })

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

				slices.Sort(kinds)
				slices.Sort(want)

				if !slices.Equal(kinds, want) {
					t.Errorf("%s on Talos %s: documents %v, want %v", n.Hostname(), tc.talos, kinds, want)
				}
			}

			mustRun(t, p, "preview", "--expect-no-changes")
			mustRun(t, p, "destroy", "--yes", "--skip-preview")

			if vms := l.PVE.VMs(); len(vms) != 0 {
				t.Errorf("%d VMs left after destroy", len(vms))
			}
		})
	}
}
