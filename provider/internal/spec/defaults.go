package spec

import (
	"fmt"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/imagefactory"
)

// Defaults are the documented default values. The schema's descriptions quote them and a test
// keeps the two in step.
var Defaults = struct {
	CPU, MemoryMiB, DiskSizeGiB                         int
	DatastoreID, Bridge, CPUType, VMMachine, BIOS, SCSI string
	PrefixLength                                        int
	FactoryURL, Platform, Arch, ImageDatastoreID        string
	Extensions                                          []string
	ContentType                                         ContentType
	InstallDisk                                         string
	PodSubnets, ServiceSubnets                          []string
	// PodSubnets6 and ServiceSubnets6 are the IPv6 defaults of dual-stack and IPv6-only
	// clusters: ULA ranges, a /56 split into a /64 per node and a /112 of services.
	PodSubnets6, ServiceSubnets6 []string
	DNSDomain                    string
}{
	CPU:              2,
	MemoryMiB:        4096,
	DiskSizeGiB:      20,
	DatastoreID:      "local-lvm",
	Bridge:           "vmbr0",
	CPUType:          "host",
	VMMachine:        "q35",
	BIOS:             "seabios",
	SCSI:             "virtio-scsi-pci",
	PrefixLength:     24,
	FactoryURL:       "https://factory.talos.dev",
	Platform:         "nocloud",
	Arch:             "amd64",
	ImageDatastoreID: "local",
	Extensions:       []string{imagefactory.GuestAgentExtension},
	ContentType:      ContentImport,
	InstallDisk:      "/dev/sda",
	PodSubnets:       []string{"10.244.0.0/16"},
	ServiceSubnets:   []string{"10.96.0.0/12"},
	PodSubnets6:      []string{"fd00:10:244::/56"},
	ServiceSubnets6:  []string{"fd00:10:96::/112"},
	DNSDomain:        "cluster.local",
}

// Minimums Talos and Proxmox need.
const (
	MinControlPlaneCPU       = 2
	MinControlPlaneMemoryMiB = 2048
	MinWorkerMemoryMiB       = 1024
	MinDiskSizeGiB           = 10
)

// talosMinor describes a supported Talos minor release.
type talosMinor struct {
	// DefaultKubernetes is the Kubernetes release this Talos minor ships by default.
	DefaultKubernetes string
	// OldestKubernetesMinor and NewestKubernetesMinor bound the Kubernetes minors it runs.
	OldestKubernetesMinor, NewestKubernetesMinor int
}

// SupportedTalos lists the Talos minors the component installs and upgrades, with the Kubernetes
// releases each runs (machinery's `compatibility` table; TestSupportedTalosMatchesMachinery checks
// this table against it).
var SupportedTalos = map[string]talosMinor{
	"v1.10": {DefaultKubernetes: "v1.33.5", OldestKubernetesMinor: 28, NewestKubernetesMinor: 33},
	"v1.11": {DefaultKubernetes: "v1.34.1", OldestKubernetesMinor: 29, NewestKubernetesMinor: 34},
	"v1.12": {DefaultKubernetes: "v1.35.0", OldestKubernetesMinor: 30, NewestKubernetesMinor: 35},
	"v1.13": {DefaultKubernetes: "v1.36.3", OldestKubernetesMinor: 31, NewestKubernetesMinor: 36},
	"v1.14": {DefaultKubernetes: "v1.37.0", OldestKubernetesMinor: 32, NewestKubernetesMinor: 37},
}

// SupportedTalosRange is the human-readable supported range.
const SupportedTalosRange = "v1.10.0 to v1.14.x"

// NewestContract is the newest configuration contract the component writes: up to v1.11 one
// v1alpha1 document; v1.12 and v1.13 move the network, time and data disks to their own
// documents; v1.14 moves Kubernetes and the installer to theirs too.
const NewestContract = "v1.14"

// ContractFor is the configuration contract a cluster created on a Talos minor gets.
func ContractFor(talosMinor string) string {
	if MinorNumber(talosMinor) > MinorNumber(NewestContract) {
		return NewestContract
	}

	return talosMinor
}

// MinorNumber is 12 for a Talos minor or configuration contract "v1.12" (0 when malformed).
func MinorNumber(minor string) int {
	var major, n int
	if _, err := fmt.Sscanf(minor, "v%d.%d", &major, &n); err != nil || major != 1 {
		return 0
	}

	return n
}

func firstInt(vals ...any) int {
	for _, v := range vals {
		switch x := v.(type) {
		case *int:
			if x != nil {
				return *x
			}
		case int:
			return x
		}
	}

	return 0
}

func firstString(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}

	return ""
}

func firstBool(v *bool, def bool) bool {
	if v != nil {
		return *v
	}

	return def
}
