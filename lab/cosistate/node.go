package cosistate

import (
	"context"
	"fmt"
	"path"
	"strconv"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/google/uuid"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/extensions"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/cluster"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/version"
)

// Owners: the Talos controllers that write these resources (shown by `talosctl get -o yaml`).
const (
	ownerMachineStatus = "runtime.MachineStatusController"
	ownerVersion       = "runtime.VersionController"
	ownerExtensions    = "runtime.ExtensionStatusController"
	ownerDiagnostics   = "runtime.DiagnosticsController"
	ownerNodename      = "k8s.NodenameController"
	ownerManifests     = "k8s.ControlPlaneBootstrapManifestsController"
	ownerVolumes       = "block.VolumeManagerController"
	ownerServices      = "v1alpha1.ServiceController"
	ownerMembers       = "cluster.MemberController"
	ownerMachineType   = "config.MachineTypeController"
)

// SetMachineStatus publishes runtime.MachineStatus: the machine's stage (the
// runtime.MachineStage constants: booting, installing, maintenance, running, rebooting,
// shutting down, resetting, upgrading) and its readiness. On Talos, ready means no unmet
// condition among "time", "network", "services", "staticPods" and "nodeReady" (checked in the
// booting and running stages only).
func (s *State) SetMachineStatus(stage runtime.MachineStage, ready bool, unmet ...runtime.UnmetCondition) error {
	ms := runtime.NewMachineStatus()
	ms.TypedSpec().Stage = stage
	ms.TypedSpec().Status = runtime.MachineStatusStatus{Ready: ready, UnmetConditions: unmet}

	return put(s, ms, ownerMachineStatus)
}

// SetVersion publishes runtime.Version (name "Talos", the version tag such as "v1.13.9"); an
// empty tag removes it.
func (s *State) SetVersion(tag string) error {
	v := runtime.NewVersion()
	if tag == "" {
		return s.destroy(v.Metadata(), ownerVersion)
	}

	v.TypedSpec().Name = version.Name
	v.TypedSpec().Version = tag

	return put(s, v, ownerVersion)
}

// SetNodename publishes k8s.Nodename (the Kubernetes node name, which `talosctl` day-2 commands
// read) and renames the static pods' statuses after it; an empty name removes it.
func (s *State) SetNodename(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	nn := k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID)

	if name == "" {
		if err := s.destroy(nn.Metadata(), ownerNodename); err != nil {
			return err
		}
	} else {
		nn.TypedSpec().Nodename = name
		nn.TypedSpec().HostnameVersion = "1"

		if err := put(s, nn, ownerNodename); err != nil {
			return err
		}
	}

	s.nodename = name

	return s.publishPodsLocked()
}

// volumeIDs are the identifiers of the emulated EPHEMERAL partition.
type volumeIDs struct {
	fsUUID, partUUID string
}

func newVolumeIDs() volumeIDs {
	return volumeIDs{fsUUID: uuid.NewString(), partUUID: uuid.NewString()}
}

// EphemeralDisk and EphemeralPartition are where the emulated EPHEMERAL volume lives: the sixth
// partition of a GRUB-layout system disk (EFI, BIOS, BOOT, META, STATE, EPHEMERAL).
const (
	EphemeralDisk      = "/dev/sda"
	EphemeralPartition = 6
)

// MinEphemeralSize is the smallest EPHEMERAL volume Talos' health check
// (check.AllNodesDiskSizes) accepts: 6 GiB (minimal.DiskSize) less the UKI EFI, STATE and META
// partitions and 10 MiB of GPT overhead, i.e. 3932 MiB.
const MinEphemeralSize uint64 = 6<<30 - (100+1+2000+100+1+10)<<20

// SetEphemeralVolume publishes block.VolumeStatus EPHEMERAL as machined reports it once the
// volume is provisioned and mounted at /var: an xfs partition of sizeBytes. Zero removes it (a
// node in maintenance mode or being reset).
func (s *State) SetEphemeralVolume(sizeBytes uint64) error {
	s.mu.Lock()
	ids := s.volume
	s.mu.Unlock()

	vs := block.NewVolumeStatus(block.NamespaceName, constants.EphemeralPartitionLabel)
	if sizeBytes == 0 {
		return s.destroy(vs.Metadata(), ownerVolumes)
	}

	vs.Metadata().Labels().Set(block.SystemVolumeLabel, "")

	spec := vs.TypedSpec()
	spec.Phase = block.VolumePhaseReady
	spec.Type = block.VolumeTypePartition
	spec.Location = EphemeralDisk + strconv.Itoa(EphemeralPartition)
	spec.MountLocation = spec.Location
	spec.PartitionIndex = EphemeralPartition
	spec.ParentLocation = EphemeralDisk
	spec.UUID = ids.fsUUID
	spec.PartitionUUID = ids.partUUID
	spec.SetSize(sizeBytes)
	spec.Filesystem = block.FilesystemTypeXFS
	spec.MountSpec = block.MountSpec{
		TargetPath:          constants.EphemeralMountPoint,
		SelinuxLabel:        constants.EphemeralSelinuxLabel,
		FileMode:            0o755,
		ProjectQuotaSupport: true,
	}

	return put(s, vs, ownerVolumes)
}

// Schematic describes the Image Factory image a node booted.
type Schematic struct {
	// ID is the schematic id; empty for an image not built by the Image Factory.
	ID string
	// FactoryURL is the Image Factory's base URL; empty means https://factory.talos.dev.
	FactoryURL string
	// Extensions are the image's system extensions, in the schematic's order.
	Extensions []Extension
}

// Extension is a system extension in a node's image.
type Extension struct {
	// Name as in a schematic ("siderolabs/qemu-guest-agent"); reported without its path.
	Name    string
	Version string
}

// SetSchematic publishes runtime.ExtensionStatus resources as a Talos booted from an Image
// Factory image has them: IDs "0", "1", … for the extensions in order, then the virtual
// "schematic" extension whose version is the schematic id (what day-2 code reads to learn a
// node's schematic). A zero Schematic removes them all.
func (s *State) SetSchematic(sc Schematic) error {
	exts := make([]extensions.Metadata, 0, len(sc.Extensions)+1)

	for _, e := range sc.Extensions {
		exts = append(exts, extensions.Metadata{
			Name: path.Base(e.Name), Version: e.Version, Author: "Sidero Labs",
			Compatibility: extensions.Compatibility{Talos: extensions.Constraint{Version: ">= v1.0.0"}},
		})
	}

	if sc.ID != "" {
		url := sc.FactoryURL
		if url == "" {
			url = "https://factory.talos.dev"
		}

		// as the Image Factory writes it (internal/artifacts/schematic.go of image-factory v1.2.0)
		exts = append(exts, extensions.Metadata{
			Name:        "schematic",
			Version:     sc.ID,
			Author:      "Image Factory (" + url + ")",
			Description: "Virtual extension which specifies the schematic of the image built with schematic.",
			Compatibility: extensions.Compatibility{
				Talos: extensions.Constraint{Version: ">= 1.0.0"},
			},
		})
	}

	keep := map[resource.ID]bool{}

	for i, md := range exts {
		id := strconv.Itoa(i)
		keep[id] = true

		es := runtime.NewExtensionStatus(runtime.NamespaceName, id)
		*es.TypedSpec() = extensions.Layer{Image: id + ".sqsh", Metadata: md}

		if err := put(s, es, ownerExtensions); err != nil {
			return err
		}
	}

	return s.prune(runtime.NewExtensionStatus(runtime.NamespaceName, "").Metadata(), ownerExtensions, keep)
}

// Diagnostic is a problem machined reports (runtime.Diagnostic); Talos' health check fails while
// any exists.
type Diagnostic struct {
	ID      string // such as "address-overlap" or "kubelet-csr"
	Message string
	Details []string
}

// SetDiagnostics replaces the node's diagnostics; none means healthy.
func (s *State) SetDiagnostics(diags ...Diagnostic) error {
	keep := map[resource.ID]bool{}

	for _, d := range diags {
		keep[d.ID] = true

		r := runtime.NewDiagnostic(runtime.NamespaceName, d.ID)
		*r.TypedSpec() = runtime.DiagnosticSpec{Message: d.Message, Details: d.Details}

		if err := put(s, r, ownerDiagnostics); err != nil {
			return err
		}
	}

	return s.prune(runtime.NewDiagnostic(runtime.NamespaceName, "").Metadata(), ownerDiagnostics, keep)
}

// Service is the state of one machined service (v1alpha1.Service, `talosctl get services`).
type Service struct {
	ID      string // apid, machined, trustd, etcd, kubelet, cri, …
	Running bool
	Healthy bool
	Unknown bool // no health check
}

// SetServices replaces the node's service resources.
func (s *State) SetServices(svcs ...Service) error {
	keep := map[resource.ID]bool{}

	for _, svc := range svcs {
		keep[svc.ID] = true

		r := v1alpha1.NewService(svc.ID)
		*r.TypedSpec() = v1alpha1.ServiceSpec{Running: svc.Running, Healthy: svc.Healthy, Unknown: svc.Unknown}

		if err := put(s, r, ownerServices); err != nil {
			return err
		}
	}

	return s.prune(v1alpha1.NewService("").Metadata(), ownerServices, keep)
}

// SetMembers replaces the cluster.Member resources (cluster discovery, which `talosctl health`
// without node flags reads); each is keyed by its Hostname, as the node name.
func (s *State) SetMembers(members ...cluster.MemberSpec) error {
	keep := map[resource.ID]bool{}

	for _, m := range members {
		keep[m.Hostname] = true

		r := cluster.NewMember(cluster.NamespaceName, m.Hostname)
		*r.TypedSpec() = m

		if err := put(s, r, ownerMembers); err != nil {
			return err
		}
	}

	return s.prune(cluster.NewMember(cluster.NamespaceName, "").Metadata(), ownerMembers, keep)
}

// SetBootstrapManifests publishes k8s.BootstrapManifestsConfig, which machined derives from the
// configuration on control planes only (see BootstrapManifestsFromConfig); Talos' health check
// reads its CNIName ("none": no CNI, so nodes are not expected to turn Ready). Nil removes it.
func (s *State) SetBootstrapManifests(spec *k8s.BootstrapManifestsConfigSpec) error {
	bm := k8s.NewBootstrapManifestsConfig()
	if spec == nil {
		return s.destroy(bm.Metadata(), ownerManifests)
	}

	*bm.TypedSpec() = *spec

	return put(s, bm, ownerManifests)
}

// SetMachineConfig publishes the active configuration (config.MachineConfig "v1alpha1", read by
// `talosctl get mc` and upgrade-k8s) and config.MachineType; nil removes both.
func (s *State) SetMachineConfig(cfg talosconfig.Provider) error {
	ctx := context.Background()
	mc := config.NewMachineConfig(cfg)
	mt := config.NewMachineType()

	if cfg == nil {
		if err := s.destroy(mc.Metadata(), ""); err != nil {
			return err
		}

		return s.destroy(mt.Metadata(), ownerMachineType)
	}

	cur, err := s.resources.Get(ctx, mc.Metadata())

	switch {
	case state.IsNotFoundError(err):
		err = s.resources.Create(ctx, mc)
	case err == nil:
		mc.Metadata().SetVersion(cur.Metadata().Version())
		err = s.resources.Update(ctx, mc)
	}

	if err != nil {
		return fmt.Errorf("cosistate: writing the machine configuration: %w", err)
	}

	if cfg.Machine() == nil {
		return s.destroy(mt.Metadata(), ownerMachineType)
	}

	mt.SetMachineType(cfg.Machine().Type())

	return s.putMachineType(ctx, mt)
}

func (s *State) putMachineType(ctx context.Context, mt *config.MachineType) error {
	typ := mt.MachineType()

	err := s.resources.Modify(ctx, mt, func(r resource.Resource) error {
		r.(*config.MachineType).SetMachineType(typ) //nolint:forcetypeassert,errcheck // Modify passes a copy of mt's type

		return nil
	}, state.WithUpdateOwner(ownerMachineType))
	if err != nil {
		return fmt.Errorf("cosistate: writing the machine type: %w", err)
	}

	return nil
}
