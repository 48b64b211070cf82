// Package proxmoxve is the lab-only stand-in for the published pulumi-resource-proxmoxve v7.13.0
// plugin. It runs the real bpg Terraform provider (github.com/bpg/terraform-provider-proxmox)
// through pulumi-terraform-bridge, serving the published v7.13.0 schema unchanged. It is built for
// the local lab only and is never shipped.
//
// The published plugin cannot be built or downloaded here (its provider module is not reachable),
// so no tfgen step is run: the schema is the published file, and the mux dispatch table that tfgen
// would normally write into bridge-metadata.json is computed at start-up instead.
package proxmoxve

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/bpg/terraform-provider-proxmox/fwprovider"
	bpgsdk "github.com/bpg/terraform-provider-proxmox/proxmoxtf/provider"
	pftfbridge "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfbridge"
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge"
	shimv2 "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfshim/sdk-v2"
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/x/muxer"
	"github.com/pulumi/pulumi-terraform-bridge/v3/unstable/metadata"
)

const (
	// Package is the Pulumi package name, the prefix of every token and config key.
	Package = "proxmoxve"
	// Version is the published plugin version this stand-in answers as. It must equal the
	// version the plugin is installed under (pulumi plugin install resource proxmoxve 7.13.0).
	Version = "7.13.0"
	// BPGVersion is the version of github.com/bpg/terraform-provider-proxmox in go.mod. The
	// plugin-framework half reports it as its own version.
	BPGVersion = "0.111.1"
)

// Tokens of the resources this stand-in backs: the ones the component registers (the VMs and
// their images; the roles, users, API tokens and ACLs of proxmoxCsi and proxmoxCcm).
const (
	VirtualMachineToken = "proxmoxve:VM/virtualMachine:VirtualMachine"
	FileToken           = "proxmoxve:Download/file:File"
	RoleToken           = "proxmoxve:Permission/role:Role"
	UserToken           = "proxmoxve:Permission/user:User"
	APITokenToken       = "proxmoxve:User/token:Token"
	ACLToken            = "proxmoxve:index/acl:Acl"
)

// Tokens of the functions this stand-in backs: the read-only ones the component's inventory check
// calls at preview.
const (
	GetNodesToken           = "proxmoxve:Cluster/getNodes:getNodes"
	GetDatastoresToken      = "proxmoxve:Storage/getDatastores:getDatastores"
	GetVirtualMachinesToken = "proxmoxve:VM/getVirtualMachines:getVirtualMachines"
	GetMappingsToken        = "proxmoxve:Hardware/getMappings:getMappings"
)

// Schema is the published pulumi-proxmoxve v7.13.0 package schema, byte for byte.
//
//go:embed proxmoxve-v7.13.0.schema.json
var Schema []byte

// dispatcher is what MuxShimWithPF returns; its concrete type is internal to the bridge.
type dispatcher interface {
	ResolveDispatch(*tfbridge.ProviderInfo) (muxer.DispatchTable, error)
}

// Info builds the bridge's provider info: bpg's SDKv2 and plugin-framework halves muxed into one
// shim (as bpg's own main.go muxes them for Terraform), the resource and function mappings, and metadata
// carrying the mux dispatch table that pf/tfbridge.MainWithMuxer requires.
//
// Only the six resources and four functions in the mappings are backed. The other resources and
// functions in the served schema exist on the wire but fail when used.
func Info(ctx context.Context) (tfbridge.ProviderInfo, error) {
	p := pftfbridge.MuxShimWithPF(ctx,
		shimv2.NewProvider(bpgsdk.ProxmoxVirtualEnvironment()),
		fwprovider.New(BPGVersion)())

	info := tfbridge.ProviderInfo{
		P:            p,
		Name:         "proxmox",
		Version:      Version,
		MetadataInfo: tfbridge.NewProviderMetadata([]byte("{}")),
		Resources: map[string]*tfbridge.ResourceInfo{
			"proxmox_virtual_environment_vm": {Tok: VirtualMachineToken}, // SDKv2 half
			// PF half. bpg v0.111.1 deprecates proxmox_virtual_environment_download_file in favour
			// of proxmox_download_file, the same resource (same code and schema) without the
			// deprecation warning. The published proxmoxve v7.13.0 plugin is built on a bpg from
			// before that rename and warns about nothing, so the lab maps to the new name: a
			// warning the real plugin never prints would be the lab's own noise.
			"proxmox_download_file":            {Tok: FileToken},
			"proxmox_virtual_environment_role": {Tok: RoleToken}, // SDKv2 half
			"proxmox_virtual_environment_user": {Tok: UserToken}, // SDKv2 half
			// PF half, under the names without bpg v0.111.1's deprecation warning (as above).
			"proxmox_user_token": {Tok: APITokenToken},
			"proxmox_acl":        {Tok: ACLToken},
		},
		DataSources: map[string]*tfbridge.DataSourceInfo{
			"proxmox_virtual_environment_nodes": {Tok: GetNodesToken},           // SDKv2 half
			"proxmox_virtual_environment_vms":   {Tok: GetVirtualMachinesToken}, // SDKv2 half
			// PF half, under the names without bpg v0.111.1's deprecation warning (as above).
			"proxmox_datastores":        {Tok: GetDatastoresToken},
			"proxmox_hardware_mappings": {Tok: GetMappingsToken},
		},
	}

	d, ok := p.(dispatcher)
	if !ok {
		return info, fmt.Errorf("muxed shim %T cannot resolve a dispatch table", p)
	}

	table, err := d.ResolveDispatch(&info)
	if err != nil {
		return info, fmt.Errorf("resolving the mux dispatch table: %w", err)
	}

	if err := metadata.Set(info.GetMetadata(), "mux", table); err != nil {
		return info, fmt.Errorf("storing the mux dispatch table: %w", err)
	}

	return info, nil
}
