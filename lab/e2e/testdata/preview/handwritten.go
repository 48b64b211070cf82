package main

import (
	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"
)

const (
	clusterName  = "bench"
	talosVersion = "v1.11.5"
)

type node struct {
	name, host, ip string
	vmID           int
}

// handwritten is what a user writes without the component: the 3-control-plane cluster of
// component, by hand with the same proxmoxve and talos resources
// and invokes, the way the Terraform modules this project replaces do it (an Image Factory
// schematic, one image download per host, a VM per node, getConfiguration per node with a
// patch, one ConfigurationApply per node, the bootstrap, the kubeconfig and the talosconfig).
// It has no day-2 resources: no health gate, no upgrades. BenchmarkPreview compares a no-op
// preview of it with the component's.

func handwritten(ctx *pulumi.Context) error {
	cfg := config.New(ctx, "")
	factory := cfg.Require("factoryUrl")
	gateway, vip := cfg.Require("gateway"), cfg.Require("vip")

	var addrs []string
	cfg.RequireObject("addresses", &addrs)

	nodes := []node{
		{"cp-1", "pve1", addrs[0], 900},
		{"cp-2", "pve2", addrs[1], 901},
		{"cp-3", "pve1", addrs[2], 902},
	}

	images, installer, err := factoryImage(ctx, factory, talosVersion, []string{"pve1", "pve2"},
		func(host string) string { return "image-" + host },
		func(string) string { return "talos-" + clusterName + "-" + talosVersion + "-nocloud-amd64.qcow2" })
	if err != nil {
		return err
	}

	secrets, err := machine.NewSecrets(ctx, "secrets", &machine.SecretsArgs{TalosVersion: pulumi.String(talosVersion)})
	if err != nil {
		return err
	}

	var applies []pulumi.Resource

	for _, n := range nodes {
		machineVM, err := vm.NewVirtualMachine(ctx, n.name, &vm.VirtualMachineArgs{
			Name:            pulumi.String(n.name),
			NodeName:        pulumi.String(n.host),
			VmId:            pulumi.Int(n.vmID),
			Tags:            pulumi.ToStringArray([]string{"talos", clusterName}),
			Machine:         pulumi.String("q35"),
			Bios:            pulumi.String("seabios"),
			ScsiHardware:    pulumi.String("virtio-scsi-pci"),
			OperatingSystem: vm.VirtualMachineOperatingSystemArgs{Type: pulumi.String("l26")},
			Cpu:             vm.VirtualMachineCpuArgs{Cores: pulumi.Int(2), Sockets: pulumi.Int(1), Type: pulumi.String("host")},
			Memory:          vm.VirtualMachineMemoryArgs{Dedicated: pulumi.Int(4096), Floating: pulumi.Int(0)},
			Agent:           vm.VirtualMachineAgentArgs{Enabled: pulumi.Bool(true), Trim: pulumi.Bool(true), Timeout: pulumi.String("5s")},
			NetworkDevices:  vm.VirtualMachineNetworkDeviceArray{vm.VirtualMachineNetworkDeviceArgs{Bridge: pulumi.String("vmbr0"), Model: pulumi.String("virtio")}},
			Disks: vm.VirtualMachineDiskArray{vm.VirtualMachineDiskArgs{
				Interface: pulumi.String("scsi0"), DatastoreId: pulumi.String("local-lvm"), Size: pulumi.Int(20),
				FileFormat: pulumi.String("raw"), Discard: pulumi.String("on"), Ssd: pulumi.Bool(true), Iothread: pulumi.Bool(false),
				ImportFrom: images[n.host].ID().ToStringOutput(),
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
		},
			// What every user of the proxmoxve provider learns: the image matters only at create,
			// and the provider reads disks back without the speed block it defaults.
			pulumi.IgnoreChanges([]string{"disks[0].importFrom", "disks[0].speed"}))
		if err != nil {
			return err
		}

		patch := pulumi.Sprintf(`machine:
  certSANs: [%[1]s, %[2]s]
  install: {disk: /dev/sda, image: "%[3]s"}
  network:
    hostname: %[4]s
    interfaces:
      - deviceSelector: {physical: true}
        dhcp: false
        addresses: [%[1]s/24]
        routes: [{network: 0.0.0.0/0, gateway: %[5]s}]
        vip: {ip: %[2]s}
`, n.ip, vip, installer, n.name, gateway)

		configuration := machine.GetConfigurationOutput(ctx, machine.GetConfigurationOutputArgs{
			ClusterName:     pulumi.String(clusterName),
			ClusterEndpoint: pulumi.String("https://" + vip + ":6443"),
			MachineType:     pulumi.String("controlplane"),
			MachineSecrets:  secrets.MachineSecrets,
			TalosVersion:    pulumi.String(talosVersion),
			ConfigPatches:   pulumi.StringArray{patch},
		})

		apply, err := machine.NewConfigurationApply(ctx, n.name+"-config", &machine.ConfigurationApplyArgs{
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

	cps := []string{nodes[0].ip, nodes[1].ip, nodes[2].ip}

	kubeconfig, talosconfig, err := startAndAccess(ctx, secrets, clusterName, nodes[0].ip, cps, cps, applies)
	if err != nil {
		return err
	}

	ctx.Export("endpoint", pulumi.String("https://"+vip+":6443"))
	ctx.Export("kubeconfig", kubeconfig)
	ctx.Export("talosconfig", talosconfig)

	return nil
}
