// Talos Linux Kubernetes clusters on Proxmox VE, as one Pulumi component.
package talosproxmox
