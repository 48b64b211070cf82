module github.com/talos-proxmox/pulumi-talos-proxmox/sdk/go

go 1.25.11

require github.com/pulumi/pulumi/sdk/v3 v3.259.0
