package spec

import (
	"slices"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/imagefactory"
)

// GPUNvidia is the nodes.<n>.gpu preset of NVIDIA GPUs (proprietary drivers), as Talos' NVIDIA
// guide sets a node up: the driver and container toolkit extensions, the kernel modules, the
// sysctl the toolkit needs, and the nvidia RuntimeClass.
const GPUNvidia = "nvidia"

// NvidiaExtensions are the Image Factory extensions of the NVIDIA preset: the production driver
// branch and its container toolkit, published for every Talos version the component supports.
var NvidiaExtensions = []string{"siderolabs/nonfree-kmod-nvidia-production", "siderolabs/nvidia-container-toolkit-production"}

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

	var missing []string
	for _, e := range NvidiaExtensions {
		if !slices.Contains(img.Extensions, e) {
			missing = append(missing, e)
		}
	}

	if len(missing) == 0 {
		return
	}

	if img.Custom {
		at := "image.schematic"
		if in.Image != nil {
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

	img.SchematicYAML, img.SchematicID, img.Extensions = s.YAML, s.ID, s.Extensions
	img.GuestAgent = s.HasExtension(imagefactory.GuestAgentExtension)

	if c.TalosVersion != "" && img.Platform != "" {
		img.InstallerImage, _ = imagefactory.InstallerImage(img.FactoryURL, img.Platform, img.SchematicID, c.TalosVersion)
	}

	n.Image = img
}

// GPUs tells whether a node of the cluster has a GPU preset of vendor.
func (c *Cluster) GPUs(vendor string) bool {
	return slices.ContainsFunc(c.Nodes, func(n Node) bool { return n.GPU == vendor })
}
