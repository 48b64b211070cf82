package cosistate_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/block"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/cosistate"
)

func TestMachineStatusWatchedFromBootingToRunning(t *testing.T) {
	st := cosistate.New()
	c := serve(t, st)
	ctx := ctxTimeout(t)

	must(t, st.SetMachineStatus(runtime.MachineStageBooting, false,
		runtime.UnmetCondition{Name: "staticPods", Reason: "kube-system/kube-apiserver-cp-1 not ready"}))

	ms, err := safe.StateGet[*runtime.MachineStatus](ctx, c.COSI, runtime.NewMachineStatus().Metadata())
	must(t, err)

	if ms.TypedSpec().Stage != runtime.MachineStageBooting || ms.TypedSpec().Status.Ready {
		t.Fatalf("got %v ready=%v, want booting, not ready", ms.TypedSpec().Stage, ms.TypedSpec().Status.Ready)
	}

	if u := ms.TypedSpec().Status.UnmetConditions; len(u) != 1 || u[0].Name != "staticPods" {
		t.Fatalf("unmet conditions: %+v", u)
	}

	if ms.Metadata().Owner() != "runtime.MachineStatusController" {
		t.Errorf("owner %q", ms.Metadata().Owner())
	}

	// the health check's call: Watch on the machine status pointer
	ch := make(chan state.Event)
	must(t, c.COSI.Watch(client.WithNode(ctx, "127.0.0.1"), runtime.NewMachineStatus().Metadata(), ch))

	if ev := nextEvent(t, ch); ev.Type != state.Created ||
		ev.Resource.(*runtime.MachineStatus).TypedSpec().Stage != runtime.MachineStageBooting { //nolint:forcetypeassert
		t.Fatalf("first event: %v %v", ev.Type, ev.Resource)
	}

	must(t, st.SetMachineStatus(runtime.MachineStageRunning, true))

	ev := nextEvent(t, ch)

	got, ok := ev.Resource.(*runtime.MachineStatus)
	if ev.Type != state.Updated || !ok {
		t.Fatalf("second event: %v %T", ev.Type, ev.Resource)
	}

	if got.TypedSpec().Stage != runtime.MachineStageRunning || !got.TypedSpec().Status.Ready || len(got.TypedSpec().Status.UnmetConditions) != 0 {
		t.Fatalf("after update: %+v", got.TypedSpec())
	}

	// an unchanged status writes nothing: the next event is the following real change
	must(t, st.SetMachineStatus(runtime.MachineStageRunning, true))
	must(t, st.SetMachineStatus(runtime.MachineStageRebooting, false))

	if ev := nextEvent(t, ch); ev.Resource.(*runtime.MachineStatus).TypedSpec().Stage != runtime.MachineStageRebooting { //nolint:forcetypeassert
		t.Fatalf("expected the rebooting update, got %v", ev.Resource)
	}
}

func TestStaticPodsFollowTheNodename(t *testing.T) {
	st := cosistate.New()
	c := serve(t, st)
	ctx := ctxTimeout(t)

	pods := []cosistate.StaticPod{
		{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.34.1", Ready: true, HostIP: "10.5.0.2"},
		{Name: "kube-controller-manager", Image: "registry.k8s.io/kube-controller-manager:v1.34.1", Ready: true},
		{Name: "kube-scheduler", Image: "registry.k8s.io/kube-scheduler:v1.34.1"},
	}

	if err := st.SetStaticPods(pods); err == nil {
		t.Fatal("static pods without a nodename were accepted")
	}

	must(t, st.SetNodename("cp-1"))
	must(t, st.SetStaticPods(pods))

	list, err := safe.StateListAll[*k8s.StaticPodStatus](ctx, c.COSI)
	must(t, err)

	want := map[string]bool{
		"kube-system/kube-apiserver-cp-1": true, "kube-system/kube-controller-manager-cp-1": true, "kube-system/kube-scheduler-cp-1": false,
	}

	if list.Len() != len(want) {
		t.Fatalf("%d static pod statuses, want %d", list.Len(), len(want))
	}

	for sp := range list.All() {
		ready, ok := want[sp.Metadata().ID()]
		if !ok {
			t.Fatalf("unexpected static pod status %s", sp.Metadata().ID())
		}

		ps := podStatus(t, sp)
		if ps.Phase != corev1.PodRunning || podReady(ps) != ready {
			t.Errorf("%s: phase %s ready %v, want Running ready %v", sp.Metadata().ID(), ps.Phase, podReady(ps), ready)
		}

		if len(ps.ContainerStatuses) != 1 || ps.ContainerStatuses[0].State.Running == nil || ps.StartTime == nil {
			t.Errorf("%s: container statuses %+v", sp.Metadata().ID(), ps.ContainerStatuses)
		}
	}

	apiserver, err := safe.StateGetByID[*k8s.StaticPodStatus](ctx, c.COSI, "kube-system/kube-apiserver-cp-1")
	must(t, err)

	if ps := podStatus(t, apiserver); ps.PodIP != "10.5.0.2" || ps.ContainerStatuses[0].Image != pods[0].Image {
		t.Errorf("kube-apiserver: pod IP %q image %q", ps.PodIP, ps.ContainerStatuses[0].Image)
	}

	// a renamed node republishes its pods under the new name; a dropped pod disappears
	must(t, st.SetNodename("cp-renamed"))
	must(t, st.SetStaticPods(pods[:2]))

	list, err = safe.StateListAll[*k8s.StaticPodStatus](ctx, c.COSI)
	must(t, err)

	var ids []string
	for sp := range list.All() {
		ids = append(ids, sp.Metadata().ID())
	}

	if strings.Join(ids, ",") != "kube-system/kube-apiserver-cp-renamed,kube-system/kube-controller-manager-cp-renamed" {
		t.Fatalf("static pods after rename: %v", ids)
	}

	nn, err := safe.StateGetByID[*k8s.Nodename](ctx, c.COSI, k8s.NodenameID)
	must(t, err)

	if nn.TypedSpec().Nodename != "cp-renamed" {
		t.Errorf("nodename %q", nn.TypedSpec().Nodename)
	}

	must(t, st.SetStaticPods(nil))

	list, err = safe.StateListAll[*k8s.StaticPodStatus](ctx, c.COSI)
	must(t, err)

	if list.Len() != 0 {
		t.Fatalf("%d static pods left", list.Len())
	}
}

func podStatus(t *testing.T, sp *k8s.StaticPodStatus) corev1.PodStatus {
	t.Helper()

	raw, err := json.Marshal(sp.TypedSpec().PodStatus)
	must(t, err)

	var ps corev1.PodStatus
	must(t, json.Unmarshal(raw, &ps))

	return ps
}

func podReady(ps corev1.PodStatus) bool {
	for _, c := range ps.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}

	return false
}

func TestEphemeralVolume(t *testing.T) {
	st := cosistate.New()
	c := serve(t, st)
	ctx := ctxTimeout(t)

	must(t, st.SetEphemeralVolume(10 << 30))

	vs, err := safe.StateGetByID[*block.VolumeStatus](client.WithNode(ctx, "127.0.0.1"), c.COSI, constants.EphemeralPartitionLabel)
	must(t, err)

	spec := vs.TypedSpec()
	if spec.Size != 10<<30 || spec.PrettySize != "11 GB" || spec.Phase != block.VolumePhaseReady ||
		spec.Location != "/dev/sda6" || spec.MountSpec.TargetPath != "/var" || spec.Filesystem != block.FilesystemTypeXFS {
		t.Fatalf("volume status: %+v", spec)
	}

	if spec.Size < cosistate.MinEphemeralSize || cosistate.MinEphemeralSize != 3932<<20 {
		t.Fatalf("min size %d", cosistate.MinEphemeralSize)
	}

	must(t, st.SetEphemeralVolume(0))

	if _, err = safe.StateGetByID[*block.VolumeStatus](ctx, c.COSI, constants.EphemeralPartitionLabel); !state.IsNotFoundError(err) {
		t.Fatalf("after removal: %v", err)
	}
}

func TestReadOnlyAndRegisteredTypesOnly(t *testing.T) {
	st := cosistate.New()
	c := serve(t, st)
	ctx := ctxTimeout(t)

	err := c.COSI.Create(ctx, runtime.NewMachineStatus())
	if client.StatusCode(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "write access is not allowed") {
		t.Fatalf("create over the API: %v", err)
	}

	_, err = c.COSI.Get(ctx, resource.NewMetadata(runtime.NamespaceName, "Nonexistent.talos.dev", "x", resource.VersionUndefined))
	if client.StatusCode(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "is not supported") {
		t.Fatalf("unknown type: %v", err)
	}

	_, err = c.COSI.Get(ctx, resource.NewMetadata("nowhere", runtime.MachineStatusType, runtime.MachineStatusID, resource.VersionUndefined))
	if client.StatusCode(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `namespace "nowhere" is not supported`) {
		t.Fatalf("unknown namespace: %v", err)
	}

	_, err = safe.StateGet[*runtime.MachineStatus](ctx, c.COSI, runtime.NewMachineStatus().Metadata())
	if client.StatusCode(err) != codes.NotFound {
		t.Fatalf("absent machine status: %v", err)
	}

	// what `talosctl get` resolves types with
	rds, err := safe.StateListAll[*meta.ResourceDefinition](ctx, c.COSI)
	must(t, err)

	found := map[string]bool{}
	for rd := range rds.All() {
		found[rd.Metadata().ID()] = true
	}

	for _, id := range []string{"machinestatuses.runtime.talos.dev", "staticpodstatuses.kubernetes.talos.dev", "volumestatuses.block.talos.dev", "diagnostics.runtime.talos.dev"} {
		if !found[id] {
			t.Errorf("resource definition %s missing (of %d)", id, rds.Len())
		}
	}
}

func TestNodeResourcesAndClear(t *testing.T) {
	st := cosistate.New()
	c := serve(t, st)
	ctx := ctxTimeout(t)

	must(t, st.SetVersion("v1.13.9"))
	must(t, st.SetSchematic(cosistate.Schematic{
		ID:         "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515",
		Extensions: []cosistate.Extension{{Name: "siderolabs/qemu-guest-agent", Version: "10.0.2"}},
	}))
	must(t, st.SetServices(cosistate.Service{ID: "apid", Running: true, Healthy: true}, cosistate.Service{ID: "kubelet", Running: true}))
	must(t, st.SetDiagnostics())

	v, err := safe.StateGetByID[*runtime.Version](ctx, c.COSI, "version")
	must(t, err)

	if v.TypedSpec().Version != "v1.13.9" || v.TypedSpec().Name != "Talos" {
		t.Errorf("version: %+v", v.TypedSpec())
	}

	exts, err := safe.StateListAll[*runtime.ExtensionStatus](ctx, c.COSI)
	must(t, err)

	var got []string
	for e := range exts.All() {
		got = append(got, e.Metadata().ID()+"="+e.TypedSpec().Metadata.Name+"@"+e.TypedSpec().Metadata.Version)
	}

	if strings.Join(got, " ") != "0=qemu-guest-agent@10.0.2 1=schematic@ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515" {
		t.Fatalf("extensions: %v", got)
	}

	svcs, err := safe.StateListAll[*v1alpha1.Service](ctx, c.COSI)
	must(t, err)

	if svcs.Len() != 2 {
		t.Fatalf("%d services", svcs.Len())
	}

	must(t, st.SetDiagnostics(cosistate.Diagnostic{ID: "kubelet-csr", Message: "kubelet server certificate rotation is enabled, but CSR is not approved"}))

	diags, err := safe.StateListAll[*runtime.Diagnostic](ctx, c.COSI)
	must(t, err)

	if diags.Len() != 1 || diags.Get(0).Metadata().ID() != "kubelet-csr" {
		t.Fatalf("diagnostics: %d", diags.Len())
	}

	// Clear: watchers see the machine status go
	must(t, st.SetMachineStatus(runtime.MachineStageRunning, true))

	ch := make(chan state.Event)
	must(t, c.COSI.Watch(ctx, runtime.NewMachineStatus().Metadata(), ch))
	nextEvent(t, ch)

	must(t, st.Clear())

	if ev := nextEvent(t, ch); ev.Type != state.Destroyed {
		t.Fatalf("after Clear: %v", ev.Type)
	}

	for _, ptr := range []resource.Pointer{
		runtime.NewVersion().Metadata(), runtime.NewExtensionStatus(runtime.NamespaceName, "1").Metadata(),
		v1alpha1.NewService("apid").Metadata(), runtime.NewDiagnostic(runtime.NamespaceName, "kubelet-csr").Metadata(),
	} {
		if _, err := c.COSI.Get(ctx, ptr); client.StatusCode(err) != codes.NotFound {
			t.Errorf("%s after Clear: %v", ptr, err)
		}
	}

	if rds, err := safe.StateListAll[*meta.ResourceDefinition](ctx, c.COSI); err != nil || rds.Len() < 100 {
		t.Fatalf("definitions after Clear: %v", err)
	}
}
