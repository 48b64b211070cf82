package provider

import (
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// nvidiaRuntimeClassName names the inline manifest of the nvidia RuntimeClass.
const nvidiaRuntimeClassName = "nvidia-runtimeclass" // in spec.ReservedManifestNames

// gpuManifests are the cluster-wide objects of the GPU presets its nodes have: with an NVIDIA node,
// the nvidia RuntimeClass whose handler the container toolkit extension registers with containerd
// (Talos' NVIDIA guide); pods that use the GPU name it. Removed (pruned) with the last such node.
func gpuManifests(c *spec.Cluster) []talosconfig.Manifest {
	if !c.GPUs(spec.GPUNvidia) {
		return nil
	}

	return []talosconfig.Manifest{{Name: nvidiaRuntimeClassName, Contents: "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\n" +
		"metadata:\n  name: nvidia\nhandler: nvidia\n"}}
}
