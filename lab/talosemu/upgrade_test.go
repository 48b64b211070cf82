package talosemu_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

const schematic = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"

func installer(version string) string {
	return "factory.talos.dev/nocloud-installer/" + schematic + ":" + version
}

// bootID reads the boot id the way talosctl does (Read of /proc/sys/kernel/random/boot_id).
func bootID(t *testing.T, c *client.Client, n *talosemu.Node) string {
	t.Helper()

	r, err := c.Read(nodeCtx(t, n), "/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() //nolint:errcheck

	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}

	return strings.TrimSpace(string(b))
}

func version(t *testing.T, c *client.Client, n *talosemu.Node) string {
	t.Helper()

	v, err := c.Version(nodeCtx(t, n))
	if err != nil {
		t.Fatal(err)
	}

	return v.Messages[0].Version.Tag
}

// waitReboot waits until n served a new boot (its boot id changed).
func waitReboot(t *testing.T, n *talosemu.Node, before string) {
	t.Helper()

	deadline := time.Now().Add(20 * time.Second)
	for n.BootID() == before || n.State() == talosemu.StateRebooting {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reboot (state %v)", n.IP(), n.State())
		}

		time.Sleep(20 * time.Millisecond)
	}
}

// Before v1.13 only the legacy Upgrade exists; it validates etcd and reboots into the new version.
func TestLegacyUpgradeBefore113(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{TalosVersion: "v1.12.6"})
	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	c := secureClient(t, n)
	if err := c.Bootstrap(nodeCtx(t, n), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	waitState(t, n, talosemu.StateBootstrapped)

	_, err := c.LifecycleClient.Upgrade(nodeCtx(t, n), &machineapi.LifecycleServiceUpgradeRequest{})
	if err == nil {
		// a server stream reports its error on Recv
		stream, _ := c.LifecycleClient.Upgrade(nodeCtx(t, n), &machineapi.LifecycleServiceUpgradeRequest{})
		_, err = stream.Recv()
	}

	wantCode(t, err, codes.Unimplemented)

	before := bootID(t, c, n)

	//nolint:staticcheck // the legacy API is what a v1.12 node has
	if _, err := c.UpgradeWithOptions(nodeCtx(t, n), client.WithUpgradeImage(installer("v1.12.7"))); err != nil {
		t.Fatal(err)
	}

	waitReboot(t, n, before)
	waitState(t, n, talosemu.StateBootstrapped)

	c = secureClient(t, n)
	if got := version(t, c, n); got != "v1.12.7" {
		t.Fatalf("version after upgrade = %s", got)
	}

	if bootID(t, c, n) == before {
		t.Fatal("the boot id did not change")
	}

	if n.Running().Schematic != schematic {
		t.Fatalf("schematic after upgrade = %q", n.Running().Schematic)
	}

	// What day-2 code reads over COSI: the schematic as an extension, the machine running.
	ext, err := safe.StateGetByID[*runtime.ExtensionStatus](nodeCtx(t, n), c.COSI, "0")
	if err != nil || ext.TypedSpec().Metadata.Name != "schematic" || ext.TypedSpec().Metadata.Version != schematic {
		t.Fatalf("schematic extension status: %v %v", ext, err)
	}

	ms, err := safe.StateGetByID[*runtime.MachineStatus](nodeCtx(t, n), c.COSI, runtime.MachineStatusID)
	if err != nil || ms.TypedSpec().Stage != runtime.MachineStageRunning || !ms.TypedSpec().Status.Ready {
		t.Fatalf("machine status: %v %v", ms, err)
	}
}

// From v1.13: pull the installer, LifecycleService.Upgrade installs it, a reboot activates it.
func TestLifecycleUpgradeFrom113(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{TalosVersion: "v1.13.9"})
	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	c := secureClient(t, n)
	ref := installer("v1.14.1")

	upgrade := func() (int32, error) {
		stream, err := c.LifecycleClient.Upgrade(nodeCtx(t, n), &machineapi.LifecycleServiceUpgradeRequest{
			Containerd: &common.ContainerdInstance{Driver: common.ContainerDriver_CONTAINERD, Namespace: common.ContainerdNamespace_NS_SYSTEM},
			Source:     &machineapi.InstallArtifactsSource{ImageName: ref},
		})
		if err != nil {
			return -1, err
		}

		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return -1, errors.New("no exit code")
			}

			if err != nil {
				return -1, err
			}

			if code, ok := resp.GetProgress().GetResponse().(*machineapi.LifecycleServiceInstallProgress_ExitCode); ok {
				return code.ExitCode, nil
			}
		}
	}

	_, err := upgrade()
	wantCode(t, err, codes.Internal)

	pull, err := c.ImageClient.Pull(nodeCtx(t, n), &machineapi.ImageServicePullRequest{ImageRef: ref})
	if err != nil {
		t.Fatal(err)
	}

	for {
		if _, err := pull.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}

	n.SetFaults(talosemu.Faults{UpgradeError: true})

	if code, err := upgrade(); err != nil || code != 1 {
		t.Fatalf("upgrade with a failing installer: exit %d, %v", code, err)
	}

	n.SetFaults(talosemu.Faults{})

	if code, err := upgrade(); err != nil || code != 0 {
		t.Fatalf("upgrade: exit %d, %v", code, err)
	}

	if got := version(t, c, n); got != "v1.13.9" {
		t.Fatalf("version before the reboot = %s", got)
	}

	before := bootID(t, c, n)
	if err := c.Reboot(nodeCtx(t, n)); err != nil {
		t.Fatal(err)
	}

	waitReboot(t, n, before)
	waitState(t, n, talosemu.StateInstalled)

	if got := version(t, secureClient(t, n), n); got != "v1.14.1" {
		t.Fatalf("version after the reboot = %s", got)
	}
}

// A node whose new version fails to boot comes back on the old one.
func TestUpgradeRollsBackWhenTheNewVersionFailsToBoot(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{TalosVersion: "v1.11.5", Faults: talosemu.Faults{RollbackUpgrade: true}})
	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	c := secureClient(t, n)
	before := bootID(t, c, n)

	//nolint:staticcheck // the legacy API is what a v1.11 node has
	if _, err := c.UpgradeWithOptions(nodeCtx(t, n), client.WithUpgradeImage(installer("v1.11.6")), client.WithUpgradeForce(true)); err != nil {
		t.Fatal(err)
	}

	waitReboot(t, n, before)
	waitState(t, n, talosemu.StateInstalled)

	if got := version(t, secureClient(t, n), n); got != "v1.11.5" {
		t.Fatalf("version after a failed boot = %s, want the old v1.11.5", got)
	}
}

// The legacy Upgrade refuses while an etcd member is down, as machined's ValidateForUpgrade does.
func TestLegacyUpgradeRefusesWithAnEtcdMemberDown(t *testing.T) {
	t.Parallel()

	_, cps := threeControlPlanes(t)
	cps[2].StopEtcd()

	c := secureClient(t, cps[0])

	//nolint:staticcheck // the legacy API
	_, err := c.UpgradeWithOptions(nodeCtx(t, cps[0]), client.WithUpgradeImage(installer("v1.11.6")))
	if err == nil || !strings.Contains(err.Error(), "error validating etcd for upgrade") || !strings.Contains(err.Error(), "is not healthy") {
		t.Fatalf("upgrade with a member down: %v", err)
	}

	if cps[0].Running().Version != "v1.11.5" {
		t.Fatal("the refused upgrade changed the version")
	}
}
