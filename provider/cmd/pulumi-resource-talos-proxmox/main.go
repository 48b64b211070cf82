package main

import (
	_ "github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/download"
	_ "github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/vm"
	_ "github.com/pulumi/pulumi-go-provider/infer"
	_ "github.com/pulumi/pulumi-go-provider/integration"
	_ "github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	_ "github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"
	_ "github.com/pulumiverse/pulumi-talos/sdk/go/talos/client"
	_ "github.com/pulumiverse/pulumi-talos/sdk/go/talos/cluster"
	_ "github.com/pulumiverse/pulumi-talos/sdk/go/talos/imagefactory"
	_ "go.yaml.in/yaml/v4"
	_ "github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	_ "github.com/siderolabs/talos/pkg/machinery/config/generate"
	_ "github.com/siderolabs/talos/pkg/machinery/config/configloader"
)

func main() {}
