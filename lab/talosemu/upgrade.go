package talosemu

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/blang/semver"
	"github.com/google/uuid"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/etcdmember"
)

// SetRebootDelay changes how long the node's API stays down in its next reboots or resets
// (Options.RebootDelay: 0 the default, negative none), e.g. to give one step of a test slower
// reboots than the others.
func (n *Node) SetRebootDelay(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()

	n.opts.RebootDelay = defaultDelay(d, DefaultRebootDelay)
}

// StopEtcd hard-stops the node's etcd member while the node stays up (a crashed etcd): it stays in
// the member list and starts again at the node's next boot. It returns once the member's server
// has stopped (nothing listens on its ports any more).
func (n *Node) StopEtcd() { <-n.Cluster().killEtcd(n) }

// StartEtcd starts a member that StopEtcd stopped, from its data (`talosctl service etcd restart`).
func (n *Node) StartEtcd() { n.Cluster().restartEtcd(n) }

// Installed is what a node runs: its Talos version and the Image Factory schematic of its
// installer ("" for the vanilla installer).
type Installed struct {
	Version   string
	Schematic string
	// SecureBoot: the Secure Boot installer or image (a signed systemd-boot and UKI).
	SecureBoot bool `json:",omitempty"`
}

// Running reports the version and schematic the node runs.
func (n *Node) Running() Installed {
	n.mu.Lock()
	defer n.mu.Unlock()

	return Installed{Version: n.version, Schematic: n.schematic}
}

// BootID changes at every boot of the node, like /proc/sys/kernel/random/boot_id.
func (n *Node) BootID() string {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.bootID
}

// lifecycleAPI is the first version with ImageService and LifecycleService (talosctl: ">1.13.0-alpha.2").
var lifecycleAPI = semver.MustParse("1.13.0-alpha.3")

// hasLifecycleAPI reports whether the node's version serves ImageService and LifecycleService.
func (n *Node) hasLifecycleAPI() bool {
	v, err := semver.ParseTolerant(n.talosVersion())

	return err == nil && v.GTE(lifecycleAPI)
}

// manifestInventory is the first version that applies bootstrap manifests with an inventory
// (go-kubernetes' ssa; Talos v1.13.0).
var manifestInventory = semver.MustParse("1.13.0-alpha.0")

// hasManifestInventory reports whether Talos version applies bootstrap manifests with an inventory.
func hasManifestInventory(version string) bool {
	v, err := semver.ParseTolerant(version)

	return err == nil && v.GTE(manifestInventory)
}

// unknownService is grpc-go's answer for a service the server does not register.
func unknownService(name string) error {
	return status.Errorf(codes.Unimplemented, "unknown service %s", name)
}

var installerRef = regexp.MustCompile(`^(?:[^/]+/)*(?:[a-z0-9-]*installer)(-secureboot)?(?:/([0-9a-f]{64}))?:(v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$`)

// parseInstaller reads an installer image reference: factory.talos.dev/<platform>-installer[-secureboot]/<schematic>:<version>,
// factory.talos.dev/installer[-secureboot]/<schematic>:<version> or ghcr.io/siderolabs/installer:<version>.
func parseInstaller(ref string) (Installed, error) {
	m := installerRef.FindStringSubmatch(ref)
	if m == nil {
		return Installed{}, fmt.Errorf("%q is not a Talos installer image (want <registry>/…installer[-secureboot][/<schematic>]:<vX.Y.Z>)", ref)
	}

	return Installed{Version: m[3], Schematic: m[2], SecureBoot: m[1] != ""}, nil
}

// imageService is ImageService (Talos v1.13+): pulls land in the node's image store.
type imageService struct {
	machineapi.UnimplementedImageServiceServer

	node *Node
}

// Pull "pulls" an image: an installer reference must parse; anything else is accepted.
func (s *imageService) Pull(req *machineapi.ImageServicePullRequest, srv grpc.ServerStreamingServer[machineapi.ImageServicePullResponse]) error {
	n := s.node
	if !n.hasLifecycleAPI() {
		return unknownService("machine.ImageService")
	}

	if n.snapshot().active == nil {
		return errMaintenanceAPI
	}

	ref := req.GetImageRef()

	n.mu.Lock()
	fail := n.opts.Faults.PullError
	n.mu.Unlock()

	if fail {
		return status.Errorf(codes.Unavailable, "failed to pull image %q: talosemu: injected pull failure", ref)
	}

	if strings.Contains(ref, "installer") {
		if _, err := parseInstaller(ref); err != nil {
			return status.Errorf(codes.NotFound, "failed to pull image %q: %v", ref, err)
		}
	}

	if err := srv.Send(&machineapi.ImageServicePullResponse{Response: &machineapi.ImageServicePullResponse_PullProgress{
		PullProgress: &machineapi.ImageServicePullProgress{LayerId: "sha256:talosemu"},
	}}); err != nil {
		return err
	}

	n.mu.Lock()
	n.images[ref] = true
	n.mu.Unlock()

	return srv.Send(&machineapi.ImageServicePullResponse{Response: &machineapi.ImageServicePullResponse_Name{Name: ref}})
}

// lifecycleService is LifecycleService (Talos v1.13+): Upgrade installs a pulled installer image to
// disk; the new version runs after the next reboot. It does not check etcd: the caller must.
type lifecycleService struct {
	machineapi.UnimplementedLifecycleServiceServer

	node *Node
}

// Upgrade installs the pulled image, streaming progress and an exit code as machined does.
func (s *lifecycleService) Upgrade(req *machineapi.LifecycleServiceUpgradeRequest, srv grpc.ServerStreamingServer[machineapi.LifecycleServiceUpgradeResponse]) error {
	n := s.node
	if !n.hasLifecycleAPI() {
		return unknownService("machine.LifecycleService")
	}

	ref := req.GetSource().GetImageName()

	n.mu.Lock()
	active, pulled, faults := n.active, n.images[ref], n.opts.Faults
	n.mu.Unlock()

	switch {
	case active == nil:
		return status.Error(codes.FailedPrecondition, "machine is not installed")
	case ref == "":
		return status.Error(codes.InvalidArgument, "installer image name is required")
	case !pulled:
		return status.Errorf(codes.Internal, "upgrade failed: installer image %q not found in containerd store: image %q: not found", ref, ref)
	}

	target, err := parseInstaller(ref)
	if err != nil {
		return status.Errorf(codes.Internal, "upgrade failed: %v", err)
	}

	send := func(p *machineapi.LifecycleServiceInstallProgress) error {
		return srv.Send(&machineapi.LifecycleServiceUpgradeResponse{Progress: p})
	}
	msg := func(m string) *machineapi.LifecycleServiceInstallProgress {
		return &machineapi.LifecycleServiceInstallProgress{Response: &machineapi.LifecycleServiceInstallProgress_Message{Message: m}}
	}

	if err := send(msg("running installer " + ref)); err != nil {
		return err
	}

	exit := int32(0)
	if faults.UpgradeError {
		exit = 1
		_ = send(msg("talosemu: injected installer failure"))
	} else {
		n.mu.Lock()
		n.staged = &target
		n.mu.Unlock()
		_ = send(msg("upgrade of " + target.Version + " installed; reboot to activate"))
		n.opts.Logf("talosemu %s: installed %s (schematic %q) for the next boot", n.addr, target.Version, target.Schematic)
	}

	return send(&machineapi.LifecycleServiceInstallProgress{Response: &machineapi.LifecycleServiceInstallProgress_ExitCode{ExitCode: exit}})
}

// Upgrade is the legacy MachineService.Upgrade (the only one before v1.13, deprecated after): on a
// control plane, unless forced, it validates etcd like machined's ValidateForUpgrade; then it
// installs the image and reboots at once (or at the next reboot with stage).
func (s *machineService) Upgrade(ctx context.Context, req *machineapi.UpgradeRequest) (*machineapi.UpgradeResponse, error) {
	n := s.node
	snap := n.snapshot()

	if snap.active == nil {
		return nil, errMaintenanceAPI
	}

	target, err := parseInstaller(req.GetImage())
	if err != nil {
		return nil, fmt.Errorf("error validating installer image %q: %w", req.GetImage(), err)
	}

	if snap.controlPlane && !req.GetForce() && !req.GetPreserve() {
		if err := n.validateEtcdForUpgrade(ctx); err != nil {
			return nil, fmt.Errorf("error validating etcd for upgrade: %w", err)
		}
	}

	n.mu.Lock()
	defer n.mu.Unlock()

	if n.opts.Faults.UpgradeError {
		return nil, fmt.Errorf("error validating installer image %q: talosemu: injected upgrade failure", req.GetImage())
	}

	n.staged = &target

	if !req.GetStage() {
		n.takeDownLocked(StateRebooting, n.opts.RebootDelay, n.activatePersistedLocked)
	}

	return &machineapi.UpgradeResponse{Messages: []*machineapi.Upgrade{{Ack: "Upgrade request received", ActorId: uuid.NewString()}}}, nil
}

// validateEtcdForUpgrade is etcd.Client.ValidateForUpgrade of Talos v1.13.9, against the real
// members: not exactly two members, every member started and answering a quorum read.
func (n *Node) validateEtcdForUpgrade(ctx context.Context) error {
	cli, e, err := n.Cluster().etcdClient(n, false)
	if err != nil {
		return err
	}
	defer cli.Close() //nolint:errcheck

	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), etcdCallTimeout)
	defer cancel()

	resp, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}

	if len(resp.Members) == 2 {
		return fmt.Errorf("etcd member count(%d) is insufficient to maintain quorum if upgrade commences", len(resp.Members))
	}

	for _, m := range resp.Members {
		if m.GetName() == "" {
			return fmt.Errorf("etcd member %016x is not started, all members must be running to perform an upgrade", m.GetID())
		}

		mc, err := etcdmember.NewClient(e.cfg.CA, m.GetClientURLs()...)
		if err != nil {
			return err
		}

		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = mc.Get(qctx, "health")
		qcancel()
		mc.Close() //nolint:errcheck

		if err != nil {
			return fmt.Errorf("etcd member %016x is not healthy; all members must be healthy to perform an upgrade: %w", m.GetID(), err)
		}
	}

	return nil
}

// bootStagedLocked runs at a boot: a staged installation becomes the running version, unless the
// RollbackUpgrade fault makes it fail to boot.
func (n *Node) bootStagedLocked() {
	if n.staged == nil {
		return
	}

	target := *n.staged
	n.staged = nil

	if n.opts.Faults.RollbackUpgrade {
		n.opts.Logf("talosemu %s: %s failed to boot; rolled back to %s", n.addr, target.Version, n.version)

		return
	}

	// Firmware enforcing Secure Boot refuses the unsigned boot loader of a plain installer: the
	// node stays down (a real one stops at the firmware's "Access Denied").
	if n.opts.Security.SecureBoot && !target.SecureBoot {
		n.bootFailure = fmt.Sprintf("the firmware refused %s's unsigned boot loader (installed without Secure Boot)", target.Version)

		return
	}

	n.opts.Logf("talosemu %s: booted %s (was %s)", n.addr, target.Version, n.version)
	n.version, n.schematic = target.Version, target.Schematic
}
