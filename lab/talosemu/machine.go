package talosemu

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"time"

	"github.com/google/uuid"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	storageapi "github.com/siderolabs/talos/pkg/machinery/api/storage"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// machineService is the node's MachineService. Methods real Talos lacks in maintenance mode answer
// there exactly as the real maintenance server does.
type machineService struct {
	machineapi.UnimplementedMachineServiceServer

	node *Node
}

// errMaintenanceAPI is what the maintenance server answers to a peer without the admin role (every
// peer not on SideroLink) for Version, Upgrade, Reset and MetaWrite.
var errMaintenanceAPI = status.Error(codes.Unimplemented, "API is not implemented in maintenance mode")

// notInMaintenance is grpc-go's answer for a method the maintenance server does not register.
func notInMaintenance(method string) error {
	return status.Errorf(codes.Unimplemented, "method %s not implemented", method)
}

// snapshot is a consistent view of the node for one call.
type snapshot struct {
	active       *appliedConfig
	controlPlane bool
	etcdMember   bool
	etcdFailure  string // the etcd service's failure message ("" unless it failed)
	kubelet      bool   // the kubelet is healthy
	bootedAt     time.Time
}

func (n *Node) snapshot() snapshot {
	n.mu.Lock()
	defer n.mu.Unlock()

	return snapshot{
		active:       n.active,
		controlPlane: n.isControlPlaneLocked(),
		etcdMember:   n.Cluster().isMember(n),
		etcdFailure:  n.Cluster().etcdFailure(n),
		kubelet:      n.Cluster().kubeletHealthy(n),
		bootedAt:     n.bootedAt,
	}
}

// Version reports the Talos version from Options.
func (s *machineService) Version(context.Context, *emptypb.Empty) (*machineapi.VersionResponse, error) {
	if s.node.snapshot().active == nil {
		return nil, errMaintenanceAPI
	}

	return &machineapi.VersionResponse{Messages: []*machineapi.Version{{
		Version: &machineapi.VersionInfo{
			Tag:       s.node.talosVersion(),
			Sha:       "talosemu",
			GoVersion: goruntime.Version(),
			Os:        "linux",
			Arch:      "amd64",
		},
		Platform: &machineapi.PlatformInfo{Name: "nocloud", Mode: "cloud"},
		Features: &machineapi.FeaturesInfo{Rbac: true},
	}}}, nil
}

// Bootstrap starts etcd on a control plane, once: a new cluster, or with RecoverEtcd one restored
// from the snapshot EtcdRecover uploaded.
func (s *machineService) Bootstrap(_ context.Context, req *machineapi.BootstrapRequest) (*machineapi.BootstrapResponse, error) {
	snap := s.node.snapshot()

	switch {
	case snap.active == nil:
		return nil, notInMaintenance("Bootstrap")
	case !snap.controlPlane:
		return nil, status.Error(codes.FailedPrecondition, "bootstrap can only be performed on a control plane node")
	}

	if err := s.node.Cluster().bootstrap(s.node, req.GetRecoverEtcd(), req.GetRecoverSkipHashCheck()); err != nil {
		return nil, err
	}

	s.node.opts.Logf("talosemu %s: etcd bootstrapped", s.node.addr)

	return &machineapi.BootstrapResponse{Messages: []*machineapi.Bootstrap{{}}}, nil
}

// ServiceList reports the system services of a configured node.
func (s *machineService) ServiceList(context.Context, *emptypb.Empty) (*machineapi.ServiceListResponse, error) {
	snap := s.node.snapshot()
	if snap.active == nil {
		return nil, notInMaintenance("ServiceList")
	}

	return &machineapi.ServiceListResponse{Messages: []*machineapi.ServiceList{{Services: services(snap)}}}, nil
}

// services lists what `talosctl services` shows. etcd runs once this control plane's etcd member
// runs; kubelet is healthy while the node's emulated kubelet runs.
func services(snap snapshot) []*machineapi.ServiceInfo {
	ts := timestamppb.New(snap.bootedAt)
	running := func(id string, health *machineapi.ServiceHealth) *machineapi.ServiceInfo {
		return &machineapi.ServiceInfo{
			Id:     id,
			State:  "Running",
			Events: &machineapi.ServiceEvents{Events: []*machineapi.ServiceEvent{{Msg: "Service started", State: "Running", Ts: ts}}},
			Health: health,
		}
	}
	healthy := func() *machineapi.ServiceHealth {
		return &machineapi.ServiceHealth{Healthy: true, LastMessage: "", LastChange: ts}
	}
	unknown := func() *machineapi.ServiceHealth { return &machineapi.ServiceHealth{Unknown: true} }

	list := []*machineapi.ServiceInfo{
		running("apid", healthy()),
		running("containerd", healthy()),
		running("cri", healthy()),
	}

	if snap.controlPlane {
		switch {
		case snap.etcdMember:
			list = append(list, running("etcd", healthy()))
		case snap.etcdFailure != "":
			list = append(list, &machineapi.ServiceInfo{
				Id:     "etcd",
				State:  "Failed",
				Events: &machineapi.ServiceEvents{Events: []*machineapi.ServiceEvent{{Msg: snap.etcdFailure, State: "Failed", Ts: ts}}},
				Health: unknown(),
			})
		default:
			list = append(list, &machineapi.ServiceInfo{
				Id:     "etcd",
				State:  "Preparing",
				Events: &machineapi.ServiceEvents{Events: []*machineapi.ServiceEvent{{Msg: "Running pre state", State: "Preparing", Ts: ts}}},
				Health: unknown(),
			})
		}
	}

	kubelet := &machineapi.ServiceHealth{LastMessage: "waiting for the Kubernetes API server", LastChange: ts}
	if snap.kubelet {
		kubelet = healthy()
	}

	list = append(list, running("kubelet", kubelet), running("machined", healthy()), running("syslogd", unknown()))

	if snap.controlPlane {
		list = append(list, running("trustd", healthy()))
	}

	return append(list, running("udevd", unknown()))
}

// Reboot takes the API down for RebootDelay; the node comes back with its persisted (e.g. STAGED)
// configuration.
func (s *machineService) Reboot(context.Context, *machineapi.RebootRequest) (*machineapi.RebootResponse, error) {
	n := s.node

	n.mu.Lock()
	defer n.mu.Unlock()

	if n.active == nil {
		return nil, notInMaintenance("Reboot")
	}

	n.takeDownLocked(StateRebooting, n.opts.RebootDelay, n.activatePersistedLocked)

	return &machineapi.RebootResponse{Messages: []*machineapi.Reboot{{ActorId: uuid.NewString()}}}, nil
}

// Reset wipes the node and reboots it. Wiping STATE (the default) removes the configuration, so the
// node comes back in maintenance mode; wiping EPHEMERAL (the default too) deletes the etcd data,
// after leaving etcd when Graceful is set. Reboot is accepted and changes nothing: the emulated
// node always comes back.
func (s *machineService) Reset(ctx context.Context, req *machineapi.ResetRequest) (*machineapi.ResetResponse, error) {
	n := s.node
	if n.snapshot().active == nil {
		return nil, errMaintenanceAPI
	}

	wipeState, wipeEphemeral, err := n.resetScope(req)
	if err != nil {
		return nil, err
	}

	// A graceful reset leaves etcd first (failing the reset if that fails); an ungraceful one just
	// wipes the data, leaving a dead member behind.
	if wipeEphemeral {
		if err := n.Cluster().leave(ctx, n, req.GetGraceful()); err != nil {
			return nil, err
		}
	}

	n.mu.Lock()
	defer n.mu.Unlock()

	n.takeDownLocked(StateRebooting, n.opts.RebootDelay, func() {
		if wipeEphemeral {
			n.images = map[string]bool{}
		}

		if wipeState {
			n.active, n.persisted, n.serving, n.staged = nil, nil, nil, nil
		} else {
			n.activatePersistedLocked()
		}
	})

	return &machineapi.ResetResponse{Messages: []*machineapi.Reset{{ActorId: uuid.NewString()}}}, nil
}

// resetScope validates a reset request like machined does and tells which system volumes it wipes.
func (n *Node) resetScope(req *machineapi.ResetRequest) (wipeState, wipeEphemeral bool, err error) {
	if len(req.GetUserDisksToWipe()) > 0 {
		if req.GetMode() == machineapi.ResetRequest_SYSTEM_DISK {
			return false, false, fmt.Errorf("reset failed: invalid input, wipe mode SYSTEM_DISK doesn't support UserDisksToWipe parameter")
		}

		disks := n.disks()

		for _, dev := range req.GetUserDisksToWipe() {
			i := slices.IndexFunc(disks, func(d *storageapi.Disk) bool { return d.DeviceName == dev })

			switch {
			case i < 0:
				return false, false, fmt.Errorf("reset user disk failed: device %s wasn't found", dev)
			case disks[i].SystemDisk:
				return false, false, fmt.Errorf("reset user disk failed: device %s is the system disk", dev)
			}
		}
	}

	if req.GetMode() == machineapi.ResetRequest_USER_DISKS {
		if len(req.GetSystemPartitionsToWipe()) > 0 {
			return false, false, fmt.Errorf("reset failed: invalid input, wipe mode USER_DISKS doesn't support SystemPartitionsToWipe parameter")
		}

		return false, false, nil
	}

	if len(req.GetSystemPartitionsToWipe()) == 0 {
		return true, true, nil
	}

	for _, p := range req.GetSystemPartitionsToWipe() {
		switch p.GetLabel() {
		case "STATE":
			wipeState = wipeState || p.GetWipe()
		case "EPHEMERAL":
			wipeEphemeral = wipeEphemeral || p.GetWipe()
		case "META":
		default:
			return false, false, fmt.Errorf("failed to get volume status with label %q: resource VolumeStatuses.block.talos.dev(runtime/%s@undefined) doesn't exist", p.GetLabel(), p.GetLabel())
		}
	}

	return wipeState, wipeEphemeral, nil
}

// activatePersistedLocked makes the persisted configuration the running one (what a boot does).
func (n *Node) activatePersistedLocked() {
	n.active = n.persisted
}
