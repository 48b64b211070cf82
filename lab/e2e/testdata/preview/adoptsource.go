package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/download"
	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"
	"gopkg.in/yaml.v3"
)

// ciliumManifest is the Cilium manifest the cluster bootstraps with, as `helm template` renders it
// (trimmed: its ServiceAccount, ConfigMap and DaemonSet). The adoption tests give the component
// the same text as an inline manifest.
//
//go:embed adopt-cilium.yaml
var ciliumManifest string

// adoptNode is one node of adoptSource's cluster, as a Terraform module's node map has it.
type adoptNode struct {
	name, host, role, ip string
}

const (
	adoptCluster    = "adopt"
	adoptTalos      = "v1.11.5"
	adoptKubernetes = "v1.34.1" // Talos v1.11's default, as the modules pin it
)

// adoptSource is a cluster made the way the Terraform/OpenTofu modules make them (vehagn's layout:
// a node map, an Image Factory schematic, one image download per host, a VM per node, a
// getConfiguration per node from a common and a control-plane patch template, a
// ConfigurationApply per node, the bootstrap, the kubeconfig), with only the proxmoxve and talos
// resources: the cluster the adoption tests move to the component. Its names, tags and image
// file are its own; Proxmox picks the VM ids (/cluster/nextid). What it declares is, value for
// value, what TalosProxmoxCluster declares for
//
//	clusterName: adopt, talosVersion: v1.11.5, vip, network.gateway, image.factoryUrl,
//	inlineManifests: [{name: cilium, contents: <adopt-cilium.yaml>}],
//	nodes: cp-1 {pve1, controlplane, addresses[0]}, worker-1 {pve2, worker, addresses[3]},
//	       worker-2 {pve1, worker, addresses[4]}
//
// with every other input at its default, so every node runs the configuration the component
// generates for it and every VM has the component's settings but for its tags
// (TestHandwrittenAdoptSourceMatchesTheComponent checks both).
//
// Outputs: kubeconfig, talosconfig, machineSecrets (the talos provider's machine secrets as JSON,
// the form secrets.bundle reads) and vmIds (by node name).
func adoptSource(ctx *pulumi.Context) error {
	cfg := config.New(ctx, "")
	factory := cfg.Require("factoryUrl")
	gateway, vip := cfg.Require("gateway"), cfg.Require("vip")

	var addrs []string
	cfg.RequireObject("addresses", &addrs)

	nodes := []adoptNode{
		{"cp-1", "pve1", "controlplane", addrs[0]},
		{"worker-1", "pve2", "worker", addrs[3]},
		{"worker-2", "pve1", "worker", addrs[4]},
	}

	subnet, err := netip.ParseAddr(gateway)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}

	nodeSubnet := netip.PrefixFrom(subnet, 24).Masked().String()

	// The API server's and the nodes' certificates name the VIP and every control plane.
	sans := []string{vip}

	for _, n := range nodes {
		if n.role == "controlplane" {
			sans = append(sans, n.ip)
		}
	}

	images, installer, err := factoryImage(ctx, factory, adoptTalos, []string{"pve1", "pve2"},
		func(host string) string { return "talos-image-" + host },
		func(id string) string {
			return fmt.Sprintf("%s-%s-%s-nocloud-amd64.qcow2", adoptCluster, id, adoptTalos)
		})
	if err != nil {
		return err
	}

	secrets, err := machine.NewSecrets(ctx, "machine-secrets", &machine.SecretsArgs{TalosVersion: pulumi.String(adoptTalos)})
	if err != nil {
		return err
	}

	manifests, err := yaml.Marshal(map[string]any{"cluster": map[string]any{
		"inlineManifests": []any{map[string]any{"name": "cilium", "contents": ciliumManifest}},
	}})
	if err != nil {
		return err
	}

	var (
		applies   []pulumi.Resource
		vmIDs     = pulumi.IntMap{}
		bootstrap = nodes[0]
	)

	for _, n := range nodes {
		machineVM, err := vm.NewVirtualMachine(ctx, "talos-"+n.name, adoptVMArgs(n, gateway, images[n.host]),
			// What every user of the proxmoxve provider learns: the image matters only at create,
			// and the provider reads disks back without the speed block it defaults.
			pulumi.IgnoreChanges([]string{"disks[0].importFrom", "disks[0].speed"}))
		if err != nil {
			return err
		}

		vmIDs[n.name] = machineVM.VmId

		patches := pulumi.StringArray{installer.ApplyT(func(image string) string {
			return commonPatch(n, image, gateway, vip, nodeSubnet, sans)
		}).(pulumi.StringOutput)}
		if n.role == "controlplane" {
			patches = append(patches, pulumi.String(controlPlanePatch(nodeSubnet, sans)), pulumi.String(string(manifests)))
		}

		configuration := machine.GetConfigurationOutput(ctx, machine.GetConfigurationOutputArgs{
			ClusterName:       pulumi.String(adoptCluster),
			ClusterEndpoint:   pulumi.String("https://" + vip + ":6443"),
			MachineType:       pulumi.String(n.role),
			MachineSecrets:    secrets.MachineSecrets,
			TalosVersion:      pulumi.String(adoptTalos),
			KubernetesVersion: pulumi.String(adoptKubernetes),
			ConfigPatches:     patches,
		})

		apply, err := machine.NewConfigurationApply(ctx, n.name, &machine.ConfigurationApplyArgs{
			ClientConfiguration:       secrets.ClientConfiguration,
			MachineConfigurationInput: configuration.MachineConfiguration(),
			Node:                      pulumi.String(n.ip),
			Endpoint:                  pulumi.String(n.ip),
		}, pulumi.DependsOn([]pulumi.Resource{machineVM}))
		if err != nil {
			return err
		}

		applies = append(applies, apply)
	}

	var all []string
	for _, n := range nodes {
		all = append(all, n.ip)
	}

	kubeconfig, talosconfig, err := startAndAccess(ctx, secrets, adoptCluster, bootstrap.ip, []string{bootstrap.ip}, all, applies)
	if err != nil {
		return err
	}

	ctx.Export("kubeconfig", kubeconfig)
	ctx.Export("talosconfig", talosconfig)
	ctx.Export("machineSecrets", pulumi.ToSecret(secrets.MachineSecrets.ApplyT(func(s machine.MachineSecrets) (string, error) {
		b, err := json.Marshal(pulumiFields(reflect.ValueOf(s)))
		return string(b), err
	})))
	ctx.Export("vmIds", vmIDs)

	return nil
}

// adoptVMArgs is node n's VM: the settings TalosProxmoxCluster gives a VM by default (cpu 2 host,
// 4096 MiB dedicated, a 20 GiB raw scsi0 on local-lvm imported from the image, vmbr0 virtio, q35,
// SeaBIOS, virtio-scsi-pci, the guest agent, cloud-init's static address), its description, but
// the module's own tags and no VM id.
func adoptVMArgs(n adoptNode, gateway string, image *download.File) *vm.VirtualMachineArgs {
	return &vm.VirtualMachineArgs{
		Name:     pulumi.String(n.name),
		NodeName: pulumi.String(n.host),
		Description: pulumi.Sprintf("Talos %s %s of cluster %s. Managed by Pulumi (talos-proxmox); changes made here are overwritten.",
			n.role, n.name, adoptCluster),
		Tags:            pulumi.ToStringArray([]string{"kubernetes", "talos"}),
		Machine:         pulumi.String("q35"),
		Bios:            pulumi.String("seabios"),
		ScsiHardware:    pulumi.String("virtio-scsi-pci"),
		OperatingSystem: vm.VirtualMachineOperatingSystemArgs{Type: pulumi.String("l26")},
		Cpu:             vm.VirtualMachineCpuArgs{Cores: pulumi.Int(2), Sockets: pulumi.Int(1), Type: pulumi.String("host")},
		Memory:          vm.VirtualMachineMemoryArgs{Dedicated: pulumi.Int(4096), Floating: pulumi.Int(0)},
		Agent:           vm.VirtualMachineAgentArgs{Enabled: pulumi.Bool(true), Trim: pulumi.Bool(true), Timeout: pulumi.String("1s")},
		NetworkDevices:  vm.VirtualMachineNetworkDeviceArray{vm.VirtualMachineNetworkDeviceArgs{Bridge: pulumi.String("vmbr0"), Model: pulumi.String("virtio")}},
		Disks: vm.VirtualMachineDiskArray{vm.VirtualMachineDiskArgs{
			Interface: pulumi.String("scsi0"), DatastoreId: pulumi.String("local-lvm"), Size: pulumi.Int(20),
			FileFormat: pulumi.String("raw"), Discard: pulumi.String("on"), Ssd: pulumi.Bool(true), Iothread: pulumi.Bool(false),
			ImportFrom: image.ID().ToStringOutput(),
		}},
		Initialization: &vm.VirtualMachineInitializationArgs{
			DatastoreId: pulumi.String("local-lvm"),
			IpConfigs: vm.VirtualMachineInitializationIpConfigArray{vm.VirtualMachineInitializationIpConfigArgs{
				Ipv4: vm.VirtualMachineInitializationIpConfigIpv4Args{Address: pulumi.String(n.ip + "/24"), Gateway: pulumi.String(gateway)},
			}},
		},
		OnBoot:        pulumi.Bool(true),
		Started:       pulumi.Bool(true),
		StopOnDestroy: pulumi.Bool(true),
		Cdrom:         vm.VirtualMachineCdromArgs{FileId: pulumi.String("none")},
	}
}

// commonPatch is every node's patch (the modules' common.yaml.tftpl): certificate names, the
// installer, the kubelet's subnet, the static address (with the VIP on a control plane), the
// topology labels and the cluster network.
func commonPatch(n adoptNode, installer, gateway, vip, subnet string, sans []string) string {
	vipLine := ""
	if n.role == "controlplane" {
		vipLine = fmt.Sprintf("        vip:\n          ip: %s\n", vip)
	}

	return fmt.Sprintf(`machine:
  certSANs: [%[1]s]
  install:
    disk: /dev/sda
    image: %[2]s
  kubelet:
    nodeIP:
      validSubnets: [%[3]s]
  network:
    hostname: %[4]s
    interfaces:
      - deviceSelector:
          physical: true
        dhcp: false
        addresses: [%[5]s/24]
        routes:
          - network: 0.0.0.0/0
            gateway: %[6]s
%[7]s  nodeLabels:
    topology.kubernetes.io/region: %[8]s
    topology.kubernetes.io/zone: %[9]s
cluster:
  network:
    dnsDomain: cluster.local
    podSubnets: [10.244.0.0/16]
    serviceSubnets: [10.96.0.0/12]
`, strings.Join(sans, ", "), installer, subnet, n.name, n.ip, gateway, vipLine, adoptCluster, n.host)
}

// controlPlanePatch is the control planes' patch (the modules' control-plane.yaml.tftpl).
func controlPlanePatch(subnet string, sans []string) string {
	return fmt.Sprintf(`cluster:
  allowSchedulingOnControlPlanes: false
  apiServer:
    certSANs: [%[1]s]
  etcd:
    advertisedSubnets: [%[2]s]
`, strings.Join(sans, ", "), subnet)
}

// pulumiFields is a value of the talos SDK's types with the field names of their `pulumi` tags
// (the names the provider outputs), nil pointers left out: machineSecrets as JSON.
func pulumiFields(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}

		return pulumiFields(v.Elem())
	case reflect.Struct:
		out := map[string]any{}

		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("pulumi"), ",")
			if f := pulumiFields(v.Field(i)); name != "" && f != nil {
				out[name] = f
			}
		}

		return out
	default:
		return v.Interface()
	}
}
