package talosemu_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/crypto/x509"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// kubeletVerbosity is a change Talos applies without a reboot; envFoo one that needs a reboot.
func kubeletVerbosity(v int) string {
	return fmt.Sprintf("machine:\n  kubelet:\n    extraArgs:\n      v: \"%d\"\n", v)
}

const envFoo = "machine:\n  env:\n    FOO: bar\n"

func apply(t *testing.T, n *talosemu.Node, req *machineapi.ApplyConfigurationRequest) (*machineapi.ApplyConfiguration, error) {
	t.Helper()

	resp, err := secureClient(t, n).ApplyConfiguration(nodeCtx(t, n), req)
	if err != nil {
		return nil, err
	}

	return resp.Messages[0], nil
}

func TestApplyModesOnConfiguredNode(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{})
	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	// NO_REBOOT: a kubelet change is applied live.
	live := machineConfig(t, machine.TypeControlPlane, "cp-1", kubeletVerbosity(2))

	msg, err := apply(t, n, &machineapi.ApplyConfigurationRequest{Data: live, Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT})
	if err != nil || msg.Mode != machineapi.ApplyConfigurationRequest_NO_REBOOT || msg.ModeDetails != "Applied configuration without a reboot" {
		t.Fatalf("NO_REBOOT: %v %v", msg, err)
	}

	if !bytes.Equal(n.Config(), live) || !bytes.Equal(n.PersistedConfig(), live) || n.State() != talosemu.StateInstalled {
		t.Fatalf("after NO_REBOOT: state %v", n.State())
	}

	// NO_REBOOT refuses what needs a reboot, with Talos' message.
	env := machineConfig(t, machine.TypeControlPlane, "cp-1", kubeletVerbosity(2), envFoo)

	_, err = apply(t, n, &machineapi.ApplyConfigurationRequest{Data: env, Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT})
	wantCode(t, err, codes.InvalidArgument)

	if !strings.Contains(err.Error(), "this config change can't be applied in immediate mode") || !strings.Contains(err.Error(), "+    env:") {
		t.Errorf("NO_REBOOT of an env change: %v", err)
	}

	// dry run: the summary and a diff, nothing stored.
	msg, err = apply(t, n, &machineapi.ApplyConfigurationRequest{Data: env, Mode: machineapi.ApplyConfigurationRequest_AUTO, DryRun: true})
	if err != nil || !strings.HasPrefix(msg.ModeDetails, "Dry run summary:\nApplied configuration with a reboot (skipped in dry-run).\nConfig diff:\n\n") ||
		!strings.Contains(msg.ModeDetails, "+        FOO: bar") || !bytes.Equal(n.Config(), live) {
		t.Fatalf("dry run: %v %v", msg, err)
	}

	// AUTO picks REBOOT for the env change: the API goes down and comes back with it.
	msg, err = apply(t, n, &machineapi.ApplyConfigurationRequest{Data: env, Mode: machineapi.ApplyConfigurationRequest_AUTO})
	if err != nil || msg.Mode != machineapi.ApplyConfigurationRequest_REBOOT ||
		!strings.HasPrefix(msg.ModeDetails, "Applied configuration with a reboot: this config change can't be applied in immediate mode") {
		t.Fatalf("AUTO: %v %v", msg, err)
	}

	waitState(t, n, talosemu.StateInstalled)

	if !bytes.Equal(n.Config(), env) {
		t.Fatal("AUTO/REBOOT did not activate the new configuration")
	}

	// STAGED keeps the running configuration until the next reboot.
	staged := machineConfig(t, machine.TypeControlPlane, "cp-1", kubeletVerbosity(3), envFoo)

	msg, err = apply(t, n, &machineapi.ApplyConfigurationRequest{Data: staged, Mode: machineapi.ApplyConfigurationRequest_STAGED})
	if err != nil || msg.Mode != machineapi.ApplyConfigurationRequest_STAGED ||
		msg.ModeDetails != "Staged configuration to be applied after the next reboot" {
		t.Fatalf("STAGED: %v %v", msg, err)
	}

	if !bytes.Equal(n.Config(), env) || !bytes.Equal(n.PersistedConfig(), staged) {
		t.Fatal("STAGED changed the running configuration")
	}

	if err := secureClient(t, n).Reboot(nodeCtx(t, n)); err != nil {
		t.Fatalf("reboot: %v", err)
	}

	if s := n.State(); s != talosemu.StateRebooting && s != talosemu.StateInstalled {
		t.Errorf("state right after Reboot = %v", s)
	}

	waitState(t, n, talosemu.StateInstalled)

	if !bytes.Equal(n.Config(), staged) {
		t.Fatal("the staged configuration is not running after the reboot")
	}

	// TRY runs the configuration until its timeout, then reverts.
	try := machineConfig(t, machine.TypeControlPlane, "cp-1", kubeletVerbosity(4), envFoo)

	msg, err = apply(t, n, &machineapi.ApplyConfigurationRequest{
		Data: try, Mode: machineapi.ApplyConfigurationRequest_TRY, TryModeTimeout: durationpb.New(200 * time.Millisecond),
	})
	if err != nil || !strings.Contains(msg.ModeDetails, "will be automatically reverted back in 200ms") || !bytes.Equal(n.Config(), try) {
		t.Fatalf("TRY: %v %v", msg, err)
	}

	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Equal(n.Config(), staged) {
		if time.Now().After(deadline) {
			t.Fatal("TRY was not reverted")
		}

		time.Sleep(20 * time.Millisecond)
	}
}

func TestApplyRefusesAnotherMachine(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{})
	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	otherCA, err := x509.NewSelfSignedCertificateAuthority(x509.Organization("talos"))
	if err != nil {
		t.Fatal(err)
	}

	b64 := base64.StdEncoding.EncodeToString
	newCA := fmt.Sprintf("machine:\n  ca:\n    crt: %s\n    key: %s\n", b64(otherCA.CrtPEM), b64(otherCA.KeyPEM))

	_, err = apply(t, n, &machineapi.ApplyConfigurationRequest{Data: machineConfig(t, machine.TypeControlPlane, "cp-1", newCA)})
	wantCode(t, err, codes.InvalidArgument)

	if !strings.Contains(err.Error(), "machine.ca differs") {
		t.Errorf("another OS CA: %v", err)
	}

	_, err = apply(t, n, &machineapi.ApplyConfigurationRequest{Data: machineConfig(t, machine.TypeWorker, "cp-1")})
	wantCode(t, err, codes.InvalidArgument)

	_, err = apply(t, n, &machineapi.ApplyConfigurationRequest{Data: []byte("machine: [")})
	wantCode(t, err, codes.InvalidArgument)
}

func TestResetReturnsToMaintenance(t *testing.T) {
	t.Parallel()

	cluster := newCluster(t)
	n := startNode(t, talosemu.Options{Cluster: cluster})
	cfg := machineConfig(t, machine.TypeControlPlane, "cp-1")
	install(t, n, cfg)

	if err := secureClient(t, n).Bootstrap(nodeCtx(t, n), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	// Wiping only EPHEMERAL keeps the configuration and drops the etcd data.
	err := secureClient(t, n).ResetGeneric(nodeCtx(t, n), &machineapi.ResetRequest{
		Reboot:                 true,
		SystemPartitionsToWipe: []*machineapi.ResetPartitionSpec{{Label: "EPHEMERAL", Wipe: true}},
	})
	if err != nil {
		t.Fatal(err)
	}

	waitState(t, n, talosemu.StateInstalled)

	if cluster.Bootstrapped() || !bytes.Equal(n.Config(), cfg) {
		t.Fatal("an EPHEMERAL reset kept etcd or lost the configuration")
	}

	if err := secureClient(t, n).Bootstrap(nodeCtx(t, n), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatalf("bootstrap after wiping etcd: %v", err)
	}

	waitState(t, n, talosemu.StateBootstrapped)

	// A graceful reset leaves etcd first, which etcd refuses for its last member (Talos' docs: reset
	// a single control plane with --graceful=false).
	err = secureClient(t, n).ResetGeneric(nodeCtx(t, n), &machineapi.ResetRequest{Graceful: true, Reboot: true})
	if err == nil || !strings.Contains(err.Error(), "failed to leave cluster") {
		t.Fatalf("graceful reset of the only etcd member: %v", err)
	}

	// A full ungraceful reset wipes everything.
	if err := secureClient(t, n).ResetGeneric(nodeCtx(t, n), &machineapi.ResetRequest{Reboot: true}); err != nil {
		t.Fatal(err)
	}

	waitState(t, n, talosemu.StateMaintenance)

	if n.Config() != nil || cluster.Bootstrapped() {
		t.Fatal("reset kept the configuration or etcd")
	}

	c := insecureClient(t, n)
	if _, err := c.Disks(nodeCtx(t, n)); err != nil {
		t.Fatalf("maintenance probe after reset: %v", err)
	}

	wantCode(t, c.ResetGeneric(nodeCtx(t, n), &machineapi.ResetRequest{}), codes.Unimplemented)

	install(t, n, cfg)
}

func TestRebootMakesTheNodeBrieflyUnavailable(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{RebootDelay: 300 * time.Millisecond})
	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	if err := secureClient(t, n).Reboot(nodeCtx(t, n)); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()

	_, err := secureClient(t, n).Version(ctx)
	if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
		t.Fatalf("Version during the reboot: %v", err)
	}

	waitState(t, n, talosemu.StateInstalled)

	if _, err := secureClient(t, n).Version(nodeCtx(t, n)); err != nil {
		t.Fatalf("Version after the reboot: %v", err)
	}
}

// TestAppliesAreCounted: every ApplyConfiguration call a node serves counts, in maintenance mode
// or authenticated, applied or refused; dry runs count apart.
func TestAppliesAreCounted(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{})
	counts := func(what string, applies, dryRuns int) {
		t.Helper()

		if n.Applies() != applies || n.DryRunApplies() != dryRuns {
			t.Fatalf("after %s: %d applies and %d dry runs, want %d and %d", what, n.Applies(), n.DryRunApplies(), applies, dryRuns)
		}
	}

	counts("start", 0, 0)

	_, err := insecureClient(t, n).ApplyConfiguration(nodeCtx(t, n), &machineapi.ApplyConfigurationRequest{
		Data: []byte("machine: ["), Mode: machineapi.ApplyConfigurationRequest_AUTO,
	})
	if err == nil {
		t.Fatal("a configuration that does not parse was applied")
	}

	counts("a refused apply in maintenance mode", 1, 0)

	cfg := machineConfig(t, machine.TypeControlPlane, "cp-1")
	install(t, n, cfg)
	counts("the install", 2, 0)

	live := machineConfig(t, machine.TypeControlPlane, "cp-1", kubeletVerbosity(2))
	if _, err := apply(t, n, &machineapi.ApplyConfigurationRequest{Data: live, Mode: machineapi.ApplyConfigurationRequest_AUTO, DryRun: true}); err != nil {
		t.Fatal(err)
	}

	counts("a dry run", 2, 1)

	if _, err := apply(t, n, &machineapi.ApplyConfigurationRequest{Data: live, Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT}); err != nil {
		t.Fatal(err)
	}

	counts("a live apply", 3, 1)

	_, err = apply(t, n, &machineapi.ApplyConfigurationRequest{
		Data: machineConfig(t, machine.TypeControlPlane, "cp-1", envFoo), Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT,
	})
	wantCode(t, err, codes.InvalidArgument)
	counts("an apply refused for needing a reboot", 4, 1)
}
