package main

import (
	"fmt"
	"strings"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/download"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	talos "github.com/pulumiverse/pulumi-talos/sdk/go/talos"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/client"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/cluster"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/imagefactory"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"
)

// What the hand-written programs (handwritten, adoptsource) write alike, as the Terraform modules
// do: the Image Factory image, and the cluster's start and credentials.

// schematic is the Image Factory schematic of both programs: the qemu-guest-agent extension.
const schematic = "customization:\n  systemExtensions:\n    officialExtensions:\n      - siderolabs/qemu-guest-agent\n"

// factoryImage registers the Image Factory schematic through a
// talos provider pointed at factory, and one download of its nocloud image of version per host,
// as resource resName(host) and file fileName(schematic id). It returns the downloads by host and
// the installer image.
func factoryImage(ctx *pulumi.Context, factory, version string, hosts []string, resName func(host string) string,
	fileName func(id string) string,
) (map[string]*download.File, pulumi.StringOutput, error) {
	factoryProvider, err := talos.NewProvider(ctx, "talos", &talos.ProviderArgs{ImageFactoryUrl: pulumi.String(factory)})
	if err != nil {
		return nil, pulumi.StringOutput{}, err
	}

	img, err := imagefactory.NewSchematic(ctx, "schematic", &imagefactory.SchematicArgs{Schematic: pulumi.String(schematic)},
		pulumi.Provider(factoryProvider))
	if err != nil {
		return nil, pulumi.StringOutput{}, err
	}

	images := map[string]*download.File{}

	for _, host := range hosts {
		if images[host], err = download.NewFile(ctx, resName(host), &download.FileArgs{
			ContentType: pulumi.String("import"),
			DatastoreId: pulumi.String("local"),
			NodeName:    pulumi.String(host),
			Url: img.ID().ApplyT(func(id string) string {
				return fmt.Sprintf("%s/image/%s/%s/nocloud-amd64.qcow2", factory, id, version)
			}).(pulumi.StringOutput),
			FileName: img.ID().ApplyT(fileName).(pulumi.StringOutput),
		}); err != nil {
			return nil, pulumi.StringOutput{}, err
		}
	}

	installer := img.ID().ApplyT(func(id string) string {
		return fmt.Sprintf("%s/nocloud-installer/%s:%s", strings.TrimPrefix(strings.TrimPrefix(factory, "https://"), "http://"), id, version)
	}).(pulumi.StringOutput)

	return images, installer, nil
}

// startAndAccess registers the bootstrap of etcd on first (after the configuration applies) and
// the kubeconfig through it, and reads the talosconfig for endpoints and nodes: the kubeconfig
// and the talosconfig.
func startAndAccess(ctx *pulumi.Context, secrets *machine.Secrets, clusterName, first string, endpoints, nodes []string,
	applies []pulumi.Resource,
) (pulumi.StringOutput, pulumi.StringOutput, error) {
	cc := secrets.ClientConfiguration

	boot, err := machine.NewBootstrap(ctx, "bootstrap", &machine.BootstrapArgs{
		ClientConfiguration: cc,
		Node:                pulumi.String(first),
		Endpoint:            pulumi.String(first),
	}, pulumi.DependsOn(applies))
	if err != nil {
		return pulumi.StringOutput{}, pulumi.StringOutput{}, err
	}

	kubeconfig, err := cluster.NewKubeconfig(ctx, "kubeconfig", &cluster.KubeconfigArgs{
		ClientConfiguration: cluster.KubeconfigClientConfigurationArgs{
			CaCertificate: cc.CaCertificate(), ClientCertificate: cc.ClientCertificate(), ClientKey: cc.ClientKey(),
		},
		Node:     pulumi.String(first),
		Endpoint: pulumi.String(first),
	}, pulumi.DependsOn([]pulumi.Resource{boot}))
	if err != nil {
		return pulumi.StringOutput{}, pulumi.StringOutput{}, err
	}

	talosconfig := client.GetConfigurationOutput(ctx, client.GetConfigurationOutputArgs{
		ClusterName: pulumi.String(clusterName),
		ClientConfiguration: client.GetConfigurationClientConfigurationArgs{
			CaCertificate: cc.CaCertificate(), ClientCertificate: cc.ClientCertificate(), ClientKey: cc.ClientKey(),
		},
		Endpoints: pulumi.ToStringArray(endpoints),
		Nodes:     pulumi.ToStringArray(nodes),
	})

	return kubeconfig.KubeconfigRaw, talosconfig.TalosConfig(), nil
}
