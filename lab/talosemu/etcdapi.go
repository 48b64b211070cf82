package talosemu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/etcdmember"
)

// The etcd APIs answer from the cluster's real etcd members, as machined does (v1.13.9,
// internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go): through the local member
// or every control plane's endpoint, with WithRequireLeader, and with Talos' error texts.

// etcdCallTimeout bounds a call whose client sets no deadline: without quorum, etcd clients retry
// until their context ends.
const etcdCallTimeout = 15 * time.Second

// controlPlaneOnly refuses a configured worker (and the maintenance server) like
// machinehelper.CheckControlplane.
func (s *machineService) controlPlaneOnly(method, api string) error {
	snap := s.node.snapshot()

	switch {
	case snap.active == nil:
		return notInMaintenance(method)
	case !snap.controlPlane:
		return status.Errorf(codes.Unimplemented, "%s is only available on control plane nodes", api)
	}

	return nil
}

// withEtcd runs f with an etcd client for this node: its local member, or every control plane
// with WithRequireLeader (calls fail fast without quorum).
func (s *machineService) withEtcd(ctx context.Context, local bool, f func(context.Context, *clientv3.Client, *nodeEtcd) error) error {
	cli, e, err := s.node.Cluster().etcdClient(s.node, local)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	defer cli.Close() //nolint:errcheck

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, etcdCallTimeout)
		defer cancel()
	}

	if !local {
		ctx = clientv3.WithRequireLeader(ctx)
	}

	return f(ctx, cli, e)
}

// EtcdMemberList lists the members etcd itself reports, stopped and dead ones included.
func (s *machineService) EtcdMemberList(ctx context.Context, req *machineapi.EtcdMemberListRequest) (*machineapi.EtcdMemberListResponse, error) {
	if err := s.controlPlaneOnly("EtcdMemberList", "member list"); err != nil {
		return nil, err
	}

	reply := &machineapi.EtcdMembers{}

	err := s.withEtcd(ctx, req.GetQueryLocal(), func(ctx context.Context, cli *clientv3.Client, _ *nodeEtcd) error {
		resp, err := cli.MemberList(clientv3.WithRequireLeader(ctx))
		if err != nil {
			return err
		}

		for _, m := range resp.Members {
			reply.LegacyMembers = append(reply.LegacyMembers, m.GetName())
			reply.Members = append(reply.Members, &machineapi.EtcdMember{
				Id: m.GetID(), Hostname: m.GetName(), PeerUrls: m.GetPeerURLs(), ClientUrls: m.GetClientURLs(), IsLearner: m.GetIsLearner(),
			})
		}

		return nil
	})
	if err != nil {
		return nil, err
	}

	return &machineapi.EtcdMemberListResponse{Messages: []*machineapi.EtcdMembers{reply}}, nil
}

// EtcdRemoveMemberByID removes a member, once, without retrying.
func (s *machineService) EtcdRemoveMemberByID(ctx context.Context, req *machineapi.EtcdRemoveMemberByIDRequest) (*machineapi.EtcdRemoveMemberByIDResponse, error) {
	if err := s.controlPlaneOnly("EtcdRemoveMemberByID", "etcd remove member"); err != nil {
		return nil, err
	}

	err := s.withEtcd(ctx, false, func(ctx context.Context, cli *clientv3.Client, _ *nodeEtcd) error {
		_, err := cli.MemberRemove(ctx, req.GetMemberId())

		switch {
		case err == nil:
			return nil
		case errors.Is(err, rpctypes.ErrMemberNotFound):
			return status.Error(codes.NotFound, fmt.Sprintf("failed to remove member %d: %v", req.GetMemberId(), err))
		default:
			return fmt.Errorf("failed to remove member: %w", err)
		}
	})
	if err != nil {
		return nil, err
	}

	s.node.opts.Logf("talosemu %s: etcd member %x removed", s.node.addr, req.GetMemberId())

	return &machineapi.EtcdRemoveMemberByIDResponse{Messages: []*machineapi.EtcdRemoveMemberByID{{}}}, nil
}

// EtcdLeaveCluster removes this node's member (retrying while etcd refuses membership changes),
// stops it and deletes its data. Like Talos it does not check that the rest keeps quorum.
func (s *machineService) EtcdLeaveCluster(ctx context.Context, _ *machineapi.EtcdLeaveClusterRequest) (*machineapi.EtcdLeaveClusterResponse, error) {
	if err := s.controlPlaneOnly("EtcdLeaveCluster", "etcd leave"); err != nil {
		return nil, err
	}

	if !s.node.Cluster().isMember(s.node) {
		return nil, status.Error(codes.Unavailable, "failed to leave cluster: etcd is not running on this node")
	}

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
	}

	if err := s.node.Cluster().leave(ctx, s.node, true); err != nil {
		return nil, err
	}

	s.node.opts.Logf("talosemu %s: left etcd", s.node.addr)

	return &machineapi.EtcdLeaveClusterResponse{Messages: []*machineapi.EtcdLeaveCluster{{}}}, nil
}

// EtcdForfeitLeadership moves the leadership to another member if this node's member leads, and
// answers the new leader's name (or "" when it did not lead).
func (s *machineService) EtcdForfeitLeadership(ctx context.Context, _ *machineapi.EtcdForfeitLeadershipRequest) (*machineapi.EtcdForfeitLeadershipResponse, error) {
	if err := s.controlPlaneOnly("EtcdForfeitLeadership", "etcd forfeit leadership"); err != nil {
		return nil, err
	}

	var leader string

	err := s.withEtcd(ctx, false, func(ctx context.Context, cli *clientv3.Client, e *nodeEtcd) error {
		var err error
		leader, err = forfeit(ctx, cli, e)

		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to forfeit leadership: %w", err)
	}

	return &machineapi.EtcdForfeitLeadershipResponse{Messages: []*machineapi.EtcdForfeitLeadership{{Member: leader}}}, nil
}

func forfeit(ctx context.Context, cli *clientv3.Client, e *nodeEtcd) (string, error) {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return "", fmt.Errorf("failed to list etcd members: %w", err)
	}

	if len(resp.Members) == 1 {
		return "", errors.New("cannot forfeit leadership, only one member")
	}

	var self *etcdserverpb.Member

	for _, m := range resp.Members {
		if e != nil && m.GetID() == e.id {
			self = m
		}
	}

	if self == nil {
		return "", fmt.Errorf("failed to find %q in list of etcd members", memberIDString(e))
	}

	for _, ep := range self.GetClientURLs() {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			return "", err
		}

		if st.Leader != self.GetID() {
			return "", nil
		}

		for _, m := range resp.Members {
			if m.GetID() == self.GetID() {
				continue
			}

			mc, err := etcdmember.NewClient(e.cfg.CA, ep)
			if err != nil {
				return "", err
			}

			_, err = mc.MoveLeader(ctx, m.GetID())
			mc.Close() //nolint:errcheck

			if errors.Is(err, rpctypes.ErrNotLeader) {
				return "", nil
			}

			if err != nil {
				return "", err
			}

			return m.GetName(), nil
		}
	}

	return "", nil
}

func memberIDString(e *nodeEtcd) string {
	if e == nil {
		return "0000000000000000"
	}

	return fmt.Sprintf("%016x", e.id)
}

// EtcdStatus reports the local member's status.
func (s *machineService) EtcdStatus(ctx context.Context, _ *emptypb.Empty) (*machineapi.EtcdStatusResponse, error) {
	if err := s.controlPlaneOnly("EtcdStatus", "etcd status"); err != nil {
		return nil, err
	}

	var out *machineapi.EtcdMemberStatus

	err := s.withEtcd(ctx, true, func(ctx context.Context, cli *clientv3.Client, _ *nodeEtcd) error {
		resp, err := cli.Status(ctx, cli.Endpoints()[0])
		if err != nil {
			return fmt.Errorf("failed to query etcd status: %w", err)
		}

		storage := resp.StorageVersion
		if storage == "" {
			parts := strings.SplitN(resp.Version, ".", 3)
			storage = "unknown"

			if len(parts) >= 2 {
				storage = parts[0] + "." + parts[1] + ".0"
			}
		}

		out = &machineapi.EtcdMemberStatus{
			MemberId: resp.Header.GetMemberId(), ProtocolVersion: resp.Version, DbSize: resp.DbSize, DbSizeInUse: resp.DbSizeInUse,
			Leader: resp.Leader, RaftIndex: resp.RaftIndex, RaftTerm: resp.RaftTerm, RaftAppliedIndex: resp.RaftAppliedIndex,
			StorageVersion: storage, Errors: resp.Errors, IsLearner: resp.IsLearner,
		}

		return nil
	})
	if err != nil {
		return nil, err
	}

	return &machineapi.EtcdStatusResponse{Messages: []*machineapi.EtcdStatus{{MemberStatus: out}}}, nil
}
