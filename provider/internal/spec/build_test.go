package spec

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretstest"
)

func base() Input {
	return Input{
		ClusterName:  "homelab",
		TalosVersion: "v1.11.5",
		Network:      NetworkInput{Gateway: "10.0.0.1"},
		Nodes: map[string]NodeInput{
			"cp-1": {HostNode: "pve1", Role: "controlplane", IP: "10.0.0.11"},
		},
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()

	c, err := Build(base())
	if err != nil {
		t.Fatal(err)
	}

	n := c.Nodes[0]
	if n.CPU != Defaults.CPU || n.MemoryMiB != Defaults.MemoryMiB || n.DiskSizeGiB != Defaults.DiskSizeGiB ||
		n.DatastoreID != Defaults.DatastoreID || n.Bridge != Defaults.Bridge || n.CPUType != Defaults.CPUType ||
		n.VMMachine != Defaults.VMMachine || n.BIOS != Defaults.BIOS || n.SCSIHardware != Defaults.SCSI ||
		n.InstallDisk != Defaults.InstallDisk {
		t.Errorf("node defaults = %+v", n)
	}

	if c.KubernetesVersion != "v1.34.1" || c.TalosContract != "v1.11" {
		t.Errorf("versions = %s, %s", c.KubernetesVersion, c.TalosContract)
	}

	if c.Endpoint != "10.0.0.11" || !c.AllowSchedulingOnControlPlanes || c.ProxmoxClusterName != "homelab" {
		t.Errorf("endpoint %q, scheduling %v, region %q", c.Endpoint, c.AllowSchedulingOnControlPlanes, c.ProxmoxClusterName)
	}

	if c.Image.SchematicID != "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515" || !c.Image.GuestAgent ||
		c.Image.ContentType != ContentImport || c.Image.InstallerImage != "factory.talos.dev/nocloud-installer/ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515:v1.11.5" {
		t.Errorf("image = %+v", c.Image)
	}

	if strings.Join(n.Tags, ",") != "controlplane,homelab,talos" {
		t.Errorf("tags = %v", n.Tags)
	}

	if len(c.Warnings) != 0 {
		t.Errorf("warnings = %v", c.Warnings)
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()

	in := base()
	in.VIP = "10.0.0.10"
	in.Network.Bridge = "vmbr1"
	in.Network.VLANID = new(20)
	in.NodeDefaults = NodeDefaultsInput{CPU: new(4), Bridge: "vmbr2", Tags: []string{"lab"}}
	in.Nodes["w-1"] = NodeInput{HostNode: "pve2", Role: "worker", IP: "10.0.0.21", CPU: new(8), Bridge: "vmbr3", VLANID: new(30), Tags: []string{"gpu", "lab"}}
	in.KubernetesVersion = "1.33.4"

	c, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}

	cp, w := c.Nodes[0], c.Nodes[1]
	if cp.CPU != 4 || cp.Bridge != "vmbr2" || cp.VLANID != 20 || w.CPU != 8 || w.Bridge != "vmbr3" || w.VLANID != 30 {
		t.Errorf("precedence: cp %+v, w %+v", cp, w)
	}

	if strings.Join(w.Tags, ",") != "gpu,homelab,lab,talos,worker" {
		t.Errorf("tags = %v (sorted, unique)", w.Tags)
	}

	if c.Endpoint != "10.0.0.10" || c.AllowSchedulingOnControlPlanes || c.KubernetesVersion != "v1.33.4" {
		t.Errorf("endpoint %s, scheduling %v, k8s %s", c.Endpoint, c.AllowSchedulingOnControlPlanes, c.KubernetesVersion)
	}

	if c.BootstrapNode().Name != "cp-1" {
		t.Errorf("bootstrap node = %s", c.BootstrapNode().Name)
	}
}

func TestWarningsAreNotErrors(t *testing.T) {
	t.Parallel()

	in := base()
	in.Nodes["cp-2"] = NodeInput{HostNode: "pve1", Role: "controlplane", IP: "10.0.0.12"}
	in.Nodes["w-1"] = NodeInput{HostNode: "pve2", Role: "worker", IP: "10.0.0.21", PCIDevices: []PCIDeviceInput{{ID: "0000:01:00.0"}},
		Image: &NodeImageInput{Extensions: []string{"siderolabs/qemu-guest-agent"}}}
	in.NodeDefaults.SCSIHardware = "virtio-scsi-single"
	in.Image.Extensions = []string{"siderolabs/iscsi-tools"}
	in.Image.Schematic = "customization: {}\n"

	c, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}

	all := strings.Join(c.Warnings, "\n")
	for _, w := range []string{"has 2 control planes", "endpoint: is not set and there is no vip", "control planes cp-1, cp-2 all run on Proxmox host \"pve1\"",
		"nodeDefaults.scsiHardware: \"virtio-scsi-single\" makes Talos installs hang", "nodes.w-1.pciDevices[0].id:",
		"image.extensions: is ignored", "nodes.w-1.image: the node's image has siderolabs/qemu-guest-agent and the cluster's lacks it"} {
		if !strings.Contains(all, w) {
			t.Errorf("missing warning %q in:\n%s", w, all)
		}
	}

	if c.Image.GuestAgent {
		t.Error("guest agent on without the extension")
	}
}

func TestLoopbackAddressesAreValid(t *testing.T) {
	t.Parallel()

	in := base()
	in.Network = NetworkInput{Gateway: "127.0.0.1", PrefixLength: new(8)}
	in.Nodes["cp-1"] = NodeInput{HostNode: "pve1", Role: "controlplane", IP: "127.0.0.11"}

	if _, err := Build(in); err != nil {
		t.Fatalf("the lab's loopback addresses must be accepted: %v", err)
	}
}

func TestValidationErrorUnwraps(t *testing.T) {
	t.Parallel()

	in := base()
	in.ClusterName = ""
	in.TalosVersion = ""

	_, err := Build(in)

	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 2 {
		t.Fatalf("err = %v", err)
	}
}

// FuzzBuild checks that no input makes validation panic, and that whatever it accepts yields
// a cluster with a bootstrap node and addresses.
func FuzzBuild(f *testing.F) {
	f.Add("homelab", "v1.11.5", "cp-1", "controlplane", "pve1", "10.0.0.11", "10.0.0.1", 24, "machine: {}", "/var/lib/longhorn", "bc:24:11:00:00:01", "")
	f.Add("", "1.10", "", "worker", "", "::1", "", 0, "[", "x", "zz", "customization: [")
	f.Add("a", "v1.10.0", "n", "controlplane", "h", "127.0.0.2", "127.0.0.1", 8, "[{\"op\":\"add\",\"path\":\"/machine/x\",\"value\":1}]", "/var/a/../b", "", "{}")

	f.Fuzz(func(t *testing.T, cluster, version, name, role, host, ip, gw string, prefix int, patch, mount, mac, schematic string) {
		in := Input{
			ClusterName:   cluster,
			TalosVersion:  version,
			Network:       NetworkInput{Gateway: gw, PrefixLength: &prefix},
			Image:         ImageInput{Schematic: schematic},
			ConfigPatches: []Patch{KnownPatch(patch)},
			Nodes: map[string]NodeInput{
				name: {HostNode: host, Role: role, IP: ip, MACAddress: mac,
					DataDisks: []DataDiskInput{{SizeGiB: 1, MountPath: mount}}},
			},
		}

		c, err := Build(in)
		if err != nil {
			if !strings.Contains(err.Error(), ": ") {
				t.Fatalf("error without a property path: %v", err)
			}

			return
		}

		if c.BootstrapNode().Name != name || c.Endpoint == "" || c.Image.SchematicID == "" {
			t.Fatalf("accepted but incomplete: %+v", c)
		}
	})
}

// TestKubernetesVersionFormWithoutTalosVersion: the Kubernetes version's form is checked even
// when the Talos version is missing or unsupported (only its range needs the Talos minor).
func TestKubernetesVersionFormWithoutTalosVersion(t *testing.T) {
	t.Parallel()

	for _, talos := range []string{"", "v1.15.0", "1.11"} {
		in := base()
		in.TalosVersion = talos
		in.KubernetesVersion = "latest"

		_, err := Build(in)
		if err == nil || !strings.Contains(err.Error(), "\n  - talosVersion:") || !strings.Contains(err.Error(), "\n  - kubernetesVersion: \"latest\"") {
			t.Errorf("talosVersion %q + kubernetesVersion latest: want both reported, got %v", talos, err)
		}
	}
}

// TestSecretsBundle: secrets.bundle is read at Build: a bundle is parsed into the generator's
// secrets; one that lacks a field is refused naming the field; an empty one says what to give;
// one not known yet (a preview) is carried, unchecked.
func TestSecretsBundle(t *testing.T) {
	t.Parallel()

	b := secretstest.Bundle()

	text, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}

	in := base()
	in.Secrets = &SecretsInput{Bundle: Patch{Text: string(text), Known: true}}

	c, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}

	if !c.Secrets.Known || c.Secrets.Parsed.ClusterID != b.Cluster.ID || c.Secrets.Parsed.Certs["os"].Cert == "" {
		t.Errorf("parsed secrets: %+v", c.Secrets)
	}

	broken := strings.Replace(string(text), "bootstraptoken:", "bootstrap_tokn:", 1)
	in.Secrets.Bundle.Text = broken

	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "secrets.bundle: secrets.bootstraptoken is missing") {
		t.Errorf("a bundle without its bootstrap token: %v", err)
	}

	in.Secrets.Bundle.Text = " "
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "secrets.bundle: is empty; give the cluster's secrets bundle") {
		t.Errorf("an empty bundle: %v", err)
	}

	in.Secrets.Bundle = Patch{}
	if c, err := Build(in); err != nil || c.Secrets == nil || c.Secrets.Known {
		t.Errorf("an unknown bundle: %+v, %v", c, err)
	}
}
