package talosemu

import (
	"context"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// DefaultMemoryBytes is what the Memory API reports when Options.MemoryBytes is zero.
const DefaultMemoryBytes = 4 << 30

// bootIDPath is the file talosctl reads (through the Read API) to tell that a node rebooted.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// Memory reports /proc/meminfo's totals (what Talos' memory-size health check reads).
func (s *machineService) Memory(context.Context, *emptypb.Empty) (*machineapi.MemoryResponse, error) {
	if s.node.snapshot().active == nil {
		return nil, notInMaintenance("Memory")
	}

	total := s.node.opts.MemoryBytes
	if total == 0 {
		total = DefaultMemoryBytes
	}

	kib := total / 1024

	return &machineapi.MemoryResponse{Messages: []*machineapi.Memory{{
		Meminfo: &machineapi.MemInfo{Memtotal: kib, Memfree: kib / 2, Memavailable: kib * 3 / 4},
	}}}, nil
}

// Read serves the one file day-2 code reads from a node: the boot id.
func (s *machineService) Read(req *machineapi.ReadRequest, srv grpc.ServerStreamingServer[common.Data]) error {
	if s.node.snapshot().active == nil {
		return notInMaintenance("Read")
	}

	if req.GetPath() != bootIDPath {
		return status.Errorf(codes.Unimplemented, "talosemu: only %s can be read (asked for %s)", bootIDPath, req.GetPath())
	}

	return srv.Send(&common.Data{Bytes: []byte(s.node.BootID() + "\n")})
}
