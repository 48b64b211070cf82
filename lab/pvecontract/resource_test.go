package pvecontract

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bpg/terraform-provider-proxmox/proxmox/api"
	"github.com/bpg/terraform-provider-proxmox/proxmox/cluster"
	"github.com/bpg/terraform-provider-proxmox/proxmox/ssh"
	"github.com/bpg/terraform-provider-proxmox/proxmoxtf"
	vmresource "github.com/bpg/terraform-provider-proxmox/proxmoxtf/resource/vm"
	"github.com/hashicorp/terraform-plugin-sdk/v2/diag"
	"github.com/hashicorp/terraform-plugin-sdk/v2/helper/schema"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
)

// noSSH resolves no node: import_from disks need no SSH, and a call would fail loudly.
type noSSH struct{}

func (noSSH) Resolve(context.Context, string) (ssh.ProxmoxNode, error) {
	return ssh.ProxmoxNode{}, errors.New("the lab has no SSH access to PVE nodes")
}

// providerConfig is what the provider's Configure builds from endpoint, API token and insecure.
func providerConfig(t *testing.T, l *lab) proxmoxtf.ProviderConfiguration {
	t.Helper()

	conn, err := api.NewConnection(l.fake.URL(), true, "")
	if err != nil {
		t.Fatal(err)
	}

	creds, err := api.NewCredentials("", "", "", l.fake.APIToken(), "", "")
	if err != nil {
		t.Fatal(err)
	}

	apiClient, err := api.NewClient(creds, conn)
	if err != nil {
		t.Fatal(err)
	}

	sshClient, err := ssh.NewClient("root", "", false, "", false, "", "", "", "", noSSH{})
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := proxmoxtf.NewProviderConfiguration(apiClient, sshClient, t.TempDir(), cluster.IDGeneratorConfig{})
	if err != nil {
		t.Fatal(err)
	}

	return cfg
}

func requireNoErrors(t *testing.T, step string, diags diag.Diagnostics) {
	t.Helper()

	for _, d := range diags {
		if d.Severity == diag.Error {
			t.Fatalf("%s: %s: %s", step, d.Summary, d.Detail)
		}

		t.Logf("%s: warning: %s: %s", step, d.Summary, d.Detail)
	}
}

// TestVMResourceLifecycle runs the provider's own proxmox_virtual_environment_vm resource code
// (create, read, delete) with the inputs the component sets, against the fake.
func TestVMResourceLifecycle(t *testing.T) {
	t.Parallel()

	l := newLab(t, pvefake.Options{})
	l.prepareImage(t)

	cfg := providerConfig(t, l)
	res := vmresource.VM()

	d := schema.TestResourceDataRaw(t, res.Schema, map[string]any{
		"node_name":        "pve1",
		"vm_id":            100,
		"name":             "cp-1",
		"started":          true,
		"stop_on_destroy":  true,
		"bios":             "ovmf",
		"machine":          "q35",
		"scsi_hardware":    "virtio-scsi-pci",
		"tags":             []any{"talos", "cluster-a"},
		"agent":            []any{map[string]any{"enabled": true, "timeout": "5s"}},
		"cpu":              []any{map[string]any{"cores": 2, "type": "host"}},
		"memory":           []any{map[string]any{"dedicated": 4096}},
		"operating_system": []any{map[string]any{"type": "l26"}},
		"efi_disk":         []any{map[string]any{"datastore_id": "local-lvm", "type": "4m", "file_format": "raw"}},
		"disk": []any{map[string]any{
			"interface": "scsi0", "datastore_id": "local-lvm", "size": 20, "discard": "on", "ssd": true,
			"import_from": "local:import/talos-v1.11.5-nocloud-amd64.qcow2",
		}},
		"initialization": []any{map[string]any{
			"datastore_id": "local-lvm", "interface": "ide2",
			"dns": []any{map[string]any{"servers": []any{"1.1.1.1", "9.9.9.9"}}},
			"ip_config": []any{map[string]any{"ipv4": []any{map[string]any{
				"address": "10.0.0.11/24", "gateway": "10.0.0.1",
			}}}},
		}},
		"network_device": []any{map[string]any{"bridge": "vmbr0"}},
		"hostpci":        []any{map[string]any{"device": "hostpci0", "mapping": "gpu", "pcie": true}},
	})

	requireNoErrors(t, "create", res.CreateContext(l.ctx, d, cfg))

	if d.Id() != "100" || !d.Get("started").(bool) {
		t.Fatalf("id %q, started %v", d.Id(), d.Get("started"))
	}

	if ips := d.Get("ipv4_addresses").([]any); len(ips) != 2 || ips[1].([]any)[0] != "10.0.0.11" {
		t.Fatalf("ipv4_addresses = %v", ips)
	}

	if mac := d.Get("mac_addresses").([]any); len(mac) != 2 || !strings.HasPrefix(mac[1].(string), "BC:24:11:") {
		t.Fatalf("mac_addresses = %v", mac)
	}

	disk := d.Get("disk").([]any)[0].(map[string]any)
	if disk["size"] != 20 || disk["file_format"] != "raw" || disk["path_in_datastore"] != "vm-100-disk-0" {
		t.Fatalf("disk = %v", disk)
	}

	conf, _ := l.fake.VM(100)
	t.Logf("VM 100 as stored by the fake: %v", conf.Config)

	requireNoErrors(t, "read", res.ReadContext(l.ctx, d, cfg))

	if d.Id() != "100" {
		t.Fatal("read lost the VM")
	}

	requireNoErrors(t, "delete", res.DeleteContext(l.ctx, d, cfg))

	if _, ok := l.fake.VM(100); ok {
		t.Fatal("VM 100 still exists")
	}

	if unknown := unknownCalls(l.fake); len(unknown) > 0 {
		t.Fatalf("calls the fake does not serve: %v", unknown)
	}

	t.Logf("calls: %v", l.fake.Calls())
}

func unknownCalls(s *pvefake.Server) []string {
	var out []string

	for k := range s.Calls() {
		if strings.HasPrefix(k, "UNKNOWN ") {
			out = append(out, k)
		}
	}

	return out
}
