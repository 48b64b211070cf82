package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/imagefactory"
)

// GPUNvidia is the nodes.<n>.gpu preset of NVIDIA GPUs (proprietary drivers), as Talos' NVIDIA
// guide sets a node up: the driver and container toolkit extensions, the kernel modules, the
// sysctl the toolkit needs, and the nvidia RuntimeClass.
const GPUNvidia = "nvidia"

// NvidiaRuntimeClass is the RuntimeClass (and containerd runtime handler) of the NVIDIA container
// toolkit, which the preset creates and the device plugin's pods run with.
const NvidiaRuntimeClass = "nvidia"

// NvidiaExtensions are the Image Factory extensions the NVIDIA preset adds to an image without
// an NVIDIA driver: the production driver branch and its container toolkit, published for every
// Talos version the component supports.
var NvidiaExtensions = []string{"siderolabs/nonfree-kmod-nvidia-production", "siderolabs/nvidia-container-toolkit-production"}

// nvidiaDrivers are the NVIDIA kernel module extensions, by flavour (proprietary, open) and branch
// (production, lts); nvidiaToolkit the container toolkit of a branch.
var (
	nvidiaDrivers = []string{
		"siderolabs/nonfree-kmod-nvidia-production", "siderolabs/nonfree-kmod-nvidia-lts",
		"siderolabs/nvidia-open-gpu-kernel-modules-production", "siderolabs/nvidia-open-gpu-kernel-modules-lts",
	}
	nvidiaToolkit = func(branch string) string { return "siderolabs/nvidia-container-toolkit-" + branch }
)

// nvidiaNeeds are the extensions an image with exts lacks for the NVIDIA preset: none when it has a
// driver (either flavour) and the toolkit of the driver's branch; the toolkit of its branch when it
// has only a driver; the production pair when it has no driver. An image with two drivers, or a
// toolkit of another branch than its driver's, cannot serve it (the problem says why).
func nvidiaNeeds(exts []string) (missing []string, problem string) {
	var drivers []string
	for _, e := range exts {
		if slices.Contains(nvidiaDrivers, e) {
			drivers = append(drivers, e)
		}
	}

	switch len(drivers) {
	case 0:
		for _, e := range NvidiaExtensions {
			if !slices.Contains(exts, e) {
				missing = append(missing, e)
			}
		}

		return missing, ""
	case 1:
	default:
		return nil, "has two NVIDIA drivers (" + strings.Join(drivers, ", ") + "); keep one"
	}

	branch := drivers[0][strings.LastIndex(drivers[0], "-")+1:]
	for _, other := range []string{"production", "lts"} {
		if other != branch && slices.Contains(exts, nvidiaToolkit(other)) {
			return nil, fmt.Sprintf("has the %s driver %s with the %s container toolkit; use %s", branch, drivers[0], other, nvidiaToolkit(branch))
		}
	}

	if !slices.Contains(exts, nvidiaToolkit(branch)) {
		missing = append(missing, nvidiaToolkit(branch))
	}

	return missing, ""
}

// NvidiaKernelModules are the modules Talos' NVIDIA guide loads.
var NvidiaKernelModules = []string{"nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset"}

// NvidiaSysctls relax the one KSPP setting the container toolkit's BPF programs need.
var NvidiaSysctls = map[string]string{"net.core.bpf_jit_harden": "1"}

// buildGPU checks nodes.<n>.gpu and gives the node the preset's image: its image with the NVIDIA
// extensions added (an image from a whole schematic must list them itself).
func buildGPU(p *problems, path string, in NodeInput, n *Node, c *Cluster) {
	switch in.GPU {
	case "":
		return
	case GPUNvidia:
	default:
		p.errorf(path+".gpu", "%q is not a GPU preset; use %q (or leave it unset and configure the node yourself)", in.GPU, GPUNvidia)
		return
	}

	n.GPU = in.GPU

	if len(in.PCIDevices) == 0 {
		p.errorf(path+".gpu", "needs the GPU passed through to the VM; add it to pciDevices (by mapping or id)")
	}

	img := c.ImageOf(*n)
	if img.SchematicID == "" {
		return // the image is invalid; that is reported
	}

	missing, problem := nvidiaNeeds(img.Extensions)
	if problem != "" {
		p.errorf(path+".gpu", "the node's image %s", problem)
		return
	}

	if len(missing) == 0 {
		return
	}

	if img.Custom {
		at := "image.schematic"
		if in.Image != nil && in.Image.Schematic != "" {
			at = path + ".image.schematic"
		}

		p.errorf(path+".gpu", "the node's image comes from %s, which lacks %s; add them to that schematic, or give %s.image.extensions",
			at, strings.Join(missing, ", "), path)

		return
	}

	s, err := imagefactory.FromExtensions(append(slices.Clone(img.Extensions), missing...))
	if err != nil {
		p.errorf(path+".gpu", "%v", err)
		return
	}

	n.Image = img.withSchematic(s, false, c.TalosVersion)
	n.Image.ExtensionPaths = maps.Clone(img.ExtensionPaths)

	for _, e := range missing {
		n.Image.ExtensionPaths[e] = path + ".gpu"
	}
}

// GPUs tells whether a node of the cluster has a GPU preset of vendor.
func (c *Cluster) GPUs(vendor string) bool {
	return slices.ContainsFunc(c.Nodes, func(n Node) bool { return n.GPU == vendor })
}

// NVIDIA's device plugin chart, as Talos' NVIDIA guide installs it: from NVIDIA's repository, with
// the nvidia RuntimeClass. Its DaemonSet runs on the nodes its default affinity selects: the label
// NvidiaGPULabel, which the component gives the GPU preset's nodes (no node-feature-discovery).
const (
	DefaultNvidiaDevicePluginVersion    = "0.18.0"
	DefaultNvidiaDevicePluginRepository = "https://nvidia.github.io/k8s-device-plugin"
	NvidiaDevicePluginRelease           = "nvidia-device-plugin"
	NvidiaGPULabel                      = "nvidia.com/gpu.present"
)

// buildNvidiaDevicePlugin adds the device plugin's Helm release (nvidiaDevicePlugin), for the nodes
// of the NVIDIA GPU preset.
func buildNvidiaDevicePlugin(p *problems, in Input, c *Cluster, names map[string]string) {
	dp := in.NvidiaDevicePlugin
	if dp == nil {
		return
	}

	if !c.GPUs(GPUNvidia) {
		p.errorf("nvidiaDevicePlugin", "no node has the NVIDIA GPU preset, so the device plugin would run nowhere; give the GPU "+
			"nodes gpu: %q, or remove nvidiaDevicePlugin", GPUNvidia)
	}

	r := presetRelease(p, "nvidiaDevicePlugin", dp, helmrender.Source{
		Chart: NvidiaDevicePluginRelease, Repository: DefaultNvidiaDevicePluginRepository, Version: DefaultNvidiaDevicePluginVersion,
	}, map[string]any{"runtimeClassName": NvidiaRuntimeClass})

	c.NvidiaDevicePlugin = true
	c.HelmReleases = append(c.HelmReleases, r)
	names[NvidiaDevicePluginRelease] = "nvidiaDevicePlugin"
}
