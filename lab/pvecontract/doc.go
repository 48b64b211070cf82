// Package pvecontract holds contract tests of the lab's Proxmox VE fake (lab/pvefake): they
// drive it with the bpg Terraform provider's own API client packages
// (github.com/bpg/terraform-provider-proxmox/proxmox/...), pinned to v0.111.1 as in the
// proxmoxve Pulumi bridge, so that every answer is judged by the code that will consume it.
//
// It is a module of its own so that the project's root module does not depend on the provider.
package pvecontract
