package talosemu_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

func TestMaintenanceModeAnswersLikeTalos(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{
		SystemDiskSizeBytes: 20 << 30,
		DataDisks:           []talosemu.Disk{{SizeBytes: 100 << 30, Serial: "data-1"}},
	})
	c := insecureClient(t, n)
	ctx := nodeCtx(t, n)

	disks, err := c.Disks(ctx)
	if err != nil {
		t.Fatalf("Disks (the provider's maintenance probe): %v", err)
	}

	got := disks.Messages[0].Disks
	if len(got) != 2 || got[0].DeviceName != "/dev/sda" || got[0].Model != "QEMU HARDDISK" || got[0].Size != 20<<30 ||
		got[1].DeviceName != "/dev/sdb" || got[1].Serial != "data-1" || got[1].Size != 100<<30 {
		t.Fatalf("disks = %v", got)
	}

	_, err = c.Version(ctx)
	wantCode(t, err, codes.Unimplemented)

	if !strings.Contains(err.Error(), "API is not implemented in maintenance mode") {
		t.Errorf("Version error = %v", err)
	}

	wantCode(t, c.Bootstrap(ctx, &machineapi.BootstrapRequest{}), codes.Unimplemented)

	_, err = c.ApplyConfiguration(ctx, &machineapi.ApplyConfigurationRequest{
		Data: machineConfig(t, machine.TypeControlPlane, "cp"),
		Mode: machineapi.ApplyConfigurationRequest_STAGED,
	})
	wantCode(t, err, codes.Unimplemented)

	// A client that verifies the server (a talosconfig) cannot talk to the self-signed node.
	_, err = secureClient(t, n).Version(ctx)
	wantCode(t, err, codes.Unavailable)

	if n.State() != talosemu.StateMaintenance || n.Config() != nil {
		t.Fatalf("state %v, config %d bytes", n.State(), len(n.Config()))
	}
}

func TestApplyInMaintenanceSwitchesToMutualTLS(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{})
	cfg := machineConfig(t, machine.TypeControlPlane, "cp-1")

	resp, err := insecureClient(t, n).ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{
		Data: cfg,
		Mode: machineapi.ApplyConfigurationRequest_AUTO,
	})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}

	if m := resp.Messages[0]; m.Mode != machineapi.ApplyConfigurationRequest_REBOOT || m.ModeDetails != "" || m.Metadata != nil {
		t.Errorf("maintenance reply = %v, want only warnings like Talos", m)
	}

	if s := n.State(); s != talosemu.StateInstalling && s != talosemu.StateInstalled {
		t.Fatalf("state right after apply = %v", s)
	}

	waitState(t, n, talosemu.StateInstalled)

	if !bytes.Equal(n.Config(), cfg) || n.Hostname() != "cp-1" {
		t.Fatalf("stored config differs or hostname %q", n.Hostname())
	}

	// The provider's insecure probe must now fail, so that it falls back to mutual TLS.
	_, err = insecureClient(t, n).Disks(nodeCtx(t, n))
	wantCode(t, err, codes.Unavailable)

	// mTLS with the bundle's client certificate: the client checks the node's IP SAN.
	c := secureClient(t, n)

	version, err := c.Version(nodeCtx(t, n))
	if err != nil {
		t.Fatalf("Version over mTLS: %v", err)
	}

	if tag := version.Messages[0].Version.Tag; tag != talosemu.DefaultTalosVersion {
		t.Errorf("tag = %q", tag)
	}

	disks, err := c.Disks(nodeCtx(t, n))
	if err != nil || !disks.Messages[0].Disks[0].SystemDisk {
		t.Fatalf("Disks over mTLS: %v, %v", disks, err)
	}
}

func TestInvalidConfigIsRefusedWithTalosMessage(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{})
	c := insecureClient(t, n)

	for _, tc := range []struct {
		name, patch, want string
	}{
		{"endpoint without host", "cluster:\n  controlPlane:\n    endpoint: https://:6443\n", "invalid controlplane endpoint: hostname must not be blank"},
		{"no install section", "machine:\n  install:\n    $patch: delete\n", `install instructions are required in "nocloud" mode`},
	} {
		_, err := c.ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{
			Data: machineConfig(t, machine.TypeControlPlane, "cp", tc.patch),
			Mode: machineapi.ApplyConfigurationRequest_AUTO,
		})
		wantCode(t, err, codes.InvalidArgument)

		if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, "configuration validation failed: ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: message %q", tc.name, msg)
		}
	}

	// Unparseable: a plain error like real Talos (codes.Unknown).
	_, err := c.ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{Data: []byte("machine: [")})
	wantCode(t, err, codes.Unknown)

	if n.State() != talosemu.StateMaintenance {
		t.Fatalf("state = %v after refused applies", n.State())
	}

	strict := startNode(t, talosemu.Options{InvalidArgumentOnParseError: true})
	_, err = insecureClient(t, strict).ApplyConfiguration(nodeCtx(t, strict), &machineapi.ApplyConfigurationRequest{Data: []byte("machine: [")})
	wantCode(t, err, codes.InvalidArgument)
}

// Talos up to v1.13 refuses a configuration without machine.install in a mode that requires an
// install; from v1.14 an UnattendedInstallConfig document takes its place (machinery v1.14 checks
// neither). A contract-1.14 configuration has only the document: validated in the mode of the
// node's version, a v1.14 node takes it and older nodes refuse it.
func TestInstallInstructionsFollowTheNodeVersion(t *testing.T) {
	t.Parallel()

	b := *sharedBundle(t)
	b.Contract = config.TalosVersion1_14

	cfg, err := b.MachineConfig(machine.TypeControlPlane)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		version string
		ok      bool
	}{{"v1.11.5", false}, {"v1.13.9", false}, {"v1.14.1", true}} {
		n := startNode(t, talosemu.Options{TalosVersion: tc.version})

		_, err := insecureClient(t, n).ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{
			Data: cfg, Mode: machineapi.ApplyConfigurationRequest_AUTO, DryRun: true,
		})

		switch {
		case tc.ok && err != nil:
			t.Errorf("%s refused the configuration: %v", tc.version, err)
		case !tc.ok && !strings.Contains(status.Convert(err).Message(), `install instructions are required in "nocloud" mode`):
			t.Errorf("%s: %v, want the missing install instructions refused", tc.version, err)
		}
	}
}

func TestDryRunInMaintenanceChangesNothing(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{})

	resp, err := insecureClient(t, n).ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{
		Data:   machineConfig(t, machine.TypeWorker, "w"),
		Mode:   machineapi.ApplyConfigurationRequest_AUTO,
		DryRun: true,
	})
	if err != nil {
		t.Fatal(err)
	}

	if d := resp.Messages[0].ModeDetails; !strings.Contains(d, "Node is running in maintenance mode and does not have a config yet.") {
		t.Errorf("mode details = %q", d)
	}

	if n.State() != talosemu.StateMaintenance {
		t.Fatalf("state = %v", n.State())
	}
}

func TestStartRefusesNonLoopbackAndStopsWithContext(t *testing.T) {
	t.Parallel()

	for _, addr := range []string{"10.0.0.1", "::1", "localhost"} {
		if _, err := talosemu.Start(t.Context(), talosemu.Options{Address: addr}); err == nil {
			t.Errorf("Start accepted %q", addr)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	host := nextHost()

	n, err := talosemu.Start(ctx, talosemu.Options{Address: host})
	if err != nil {
		t.Fatal(err)
	}

	cancel()
	waitState(t, n, talosemu.StateClosed)

	again := startNode(t, talosemu.Options{Address: host})
	if _, err := insecureClient(t, again).Disks(nodeCtx(t, again)); err != nil {
		t.Fatalf("a new node on the freed address: %v", err)
	}
}

// TestFirstConfigurationJoinsTheClusterItNames: a node started in one registry moves, with its
// first configuration, to the registry Options.Join names for the configuration's cluster id (as
// real Talos nodes belong together by their configurations); a dry run moves nothing, and a node
// whose Join answers its own registry stays.
func TestFirstConfigurationJoinsTheClusterItNames(t *testing.T) {
	t.Parallel()

	home, other := newCluster(t), newCluster(t)
	wantID := ""

	var (
		mu    sync.Mutex
		asked []string
	)

	join := func(id string) *talosemu.Cluster {
		mu.Lock()
		defer mu.Unlock()

		asked = append(asked, id)
		if id == wantID {
			return home
		}

		return nil
	}

	cfg := machineConfig(t, machine.TypeControlPlane, "cp")

	parsed, err := configloader.NewFromBytes(cfg)
	if err != nil {
		t.Fatal(err)
	}

	wantID = parsed.DiscoveryIdentityConfig().ClusterID()

	n := startNode(t, talosemu.Options{Cluster: other, Join: join})

	if _, err := insecureClient(t, n).ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{
		Data: cfg, Mode: machineapi.ApplyConfigurationRequest_AUTO, DryRun: true,
	}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	none := len(asked) == 0
	mu.Unlock()

	if n.Cluster() != other || !none {
		t.Fatalf("a dry run moved the node or asked Join (%v)", asked)
	}

	install(t, n, cfg)

	if n.Cluster() != home || !slices.Contains(home.Nodes(), n) || slices.Contains(other.Nodes(), n) {
		t.Errorf("after its first configuration the node is not (only) in the registry of its cluster id %s", wantID)
	}

	mu.Lock()
	defer mu.Unlock()

	if !slices.Equal(asked, []string{wantID}) {
		t.Errorf("Join was asked %v, want once for %s", asked, wantID)
	}

	stay := startNode(t, talosemu.Options{Cluster: other, Join: func(string) *talosemu.Cluster { return other }})
	install(t, stay, machineConfig(t, machine.TypeControlPlane, "cp2"))

	if stay.Cluster() != other || !slices.Contains(other.Nodes(), stay) {
		t.Error("a node whose Join names its own registry left it")
	}
}
