//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// variantCluster exercises the child inputs the examples leave out: DHCP (addresses found by
// MAC), the iso content type on a shared datastore, UEFI (an EFI disk), PCI devices by id
// and by mapping, VLAN tags, data disks with and without a mount path.
func variantCluster(l *lab.Lab) string {
	return fmt.Sprintf(`name: variant
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  variant:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: variant
      talosVersion: v1.10.6
      network:
        dhcp: true
        gateway: %s
        vlanId: 20
      image:
        factoryUrl: ${factoryUrl}
        contentType: iso
        sharedDatastore: true
      nodeDefaults:
        bios: ovmf
        tags: [lab]
      nodes:
        cp-1:
          hostNode: pve1
          role: controlplane
          pciDevices: [{ id: "0000:01:00.0" }]
        worker-1:
          hostNode: %s
          role: worker
          vlanId: 30
          pciDevices: [{ mapping: gpu, pcie: true }]
          dataDisks:
            - { sizeGib: 20, mountPath: /var/lib/longhorn }
            - { sizeGib: 5 }
`, l.Address(1), l.Hosts()[1])
}

// TestChildInputsPassTheChildProvidersChecks previews a cluster that uses the inputs the
// examples leave out. Preview sends every child resource's inputs to its provider's Check: the
// real bpg code (bridged) for the proxmoxve resources, and for the talos ones the stand-in, which
// checks them against the published talos v0.7.1 schema. A property the component sends under a
// wrong name or type fails here. (The function calls are checked on `up` by the other tests.)
func TestChildInputsPassTheChildProvidersChecks(t *testing.T) {
	e := newEnv(t)
	_, p := onLab(t, e, lab.Options{Subnet: 14}, variantCluster)

	out, err := p.Run(t.Context(), "preview", "--diff")
	if err != nil {
		t.Fatalf("preview: %v\n%s", err, out)
	}

	for _, want := range []string{
		"proxmoxve:VM/virtualMachine:VirtualMachine", "proxmoxve:Download/file:File",
		"talos:machine/secrets:Secrets", "talos:machine/configurationApply:ConfigurationApply",
		"talos-proxmox:lifecycle:EtcdBootstrap", "talos:cluster/kubeconfig:Kubeconfig",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the preview has no %s:\n%s", want, out)
		}
	}

	if strings.Contains(out, "error:") {
		t.Errorf("the preview reports an error:\n%s", out)
	}
}
