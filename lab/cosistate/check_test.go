package cosistate_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/cluster"
	"github.com/siderolabs/talos/pkg/cluster/check"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	configres "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/cosistate"
)

// oneNode is a check.ClusterInfo of a single control plane reached through c (no Kubernetes).
type oneNode struct {
	cluster.K8sProvider

	c    *client.Client
	node cluster.NodeInfo
}

func (o *oneNode) Client(...string) (*client.Client, error) { return o.c, nil }
func (o *oneNode) Close() error                             { return nil }
func (o *oneNode) Nodes() []cluster.NodeInfo                { return []cluster.NodeInfo{o.node} }

func (o *oneNode) NodesByType(t machine.Type) []cluster.NodeInfo {
	if t == machine.TypeControlPlane {
		return o.Nodes()
	}

	return nil
}

func newOneNode(c *client.Client) *oneNode {
	ip := netip.MustParseAddr("127.0.0.1")

	return &oneNode{c: c, node: cluster.NodeInfo{InternalIP: ip, IPs: []netip.Addr{ip}}}
}

// TestTalosHealthAssertions runs Talos' own per-node COSI assertions (pkg/cluster/check v1.13.9)
// against the served state: they fail, then pass once the node is as a healthy one.
func TestTalosHealthAssertions(t *testing.T) {
	st := cosistate.New()
	c := serve(t, st)
	ctx := ctxTimeout(t)
	info := newOneNode(c)

	must(t, st.SetNodename("cp-1"))
	must(t, st.SetMachineStatus(runtime.MachineStageBooting, false))

	if err := check.AllNodesBootedAssertion(ctx, info); err == nil || !strings.Contains(err.Error(), "booting: [127.0.0.1]") {
		t.Fatalf("booted assertion while booting: %v", err)
	}

	if err := check.K8sControlPlaneStaticPods(ctx, info); err == nil || !strings.Contains(err.Error(), "missing static pods") {
		t.Fatalf("static pods assertion without pods: %v", err)
	}

	must(t, st.SetDiagnostics(cosistate.Diagnostic{ID: "address-overlap", Message: "host and Kubernetes pod/service CIDR addresses overlap"}))

	if err := check.NoDiagnostics(ctx, info); err == nil || !strings.Contains(err.Error(), "127.0.0.1: host and Kubernetes") {
		t.Fatalf("diagnostics assertion with a diagnostic: %v", err)
	}

	must(t, st.SetDiagnostics())
	must(t, st.SetStaticPods([]cosistate.StaticPod{
		{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.34.1", Ready: true},
		{Name: "kube-controller-manager", Image: "registry.k8s.io/kube-controller-manager:v1.34.1", Ready: true},
		{Name: "kube-scheduler", Image: "registry.k8s.io/kube-scheduler:v1.34.1", Ready: true},
	}))

	// the node comes up while the assertion watches
	go func() {
		time.Sleep(200 * time.Millisecond)
		st.SetMachineStatus(runtime.MachineStageRunning, true) //nolint:errcheck // checked by the assertion
	}()

	deadline := time.Now().Add(10 * time.Second)

	for {
		err := check.AllNodesBootedAssertion(ctx, info)
		if err == nil {
			break
		}

		if time.Now().After(deadline) {
			t.Fatalf("booted assertion: %v", err)
		}

		time.Sleep(50 * time.Millisecond)
	}

	must(t, check.K8sControlPlaneStaticPods(ctx, info))
	must(t, check.NoDiagnostics(ctx, info))
}

// TestBootstrapManifestsFromConfig derives the manifests config from a generated control plane
// configuration, as machined does, and serves it where the health check's cniDisabledStatus reads.
func TestBootstrapManifestsFromConfig(t *testing.T) {
	contract, err := config.ParseContractFromVersion("v1.11")
	must(t, err)

	bundle, err := secrets.NewBundle(secrets.NewFixedClock(time.Now()), contract)
	must(t, err)

	in, err := generate.NewInput("lab", "https://10.5.0.10:6443", "1.34.1",
		generate.WithVersionContract(contract), generate.WithSecretsBundle(bundle))
	must(t, err)

	cp, err := in.Config(machine.TypeControlPlane)
	must(t, err)

	worker, err := in.Config(machine.TypeWorker)
	must(t, err)

	if spec, err := cosistate.BootstrapManifestsFromConfig(worker); err != nil || spec != nil {
		t.Fatalf("worker: %v %v", spec, err)
	}

	spec, err := cosistate.BootstrapManifestsFromConfig(cp)
	must(t, err)

	if spec.CNIName != "flannel" || !spec.FlannelEnabled || spec.Server != "https://127.0.0.1:7445" ||
		spec.DNSServiceIP != "10.96.0.10" || spec.ClusterDomain != "cluster.local" || !spec.CoreDNSEnabled {
		t.Fatalf("manifests config: %+v", spec)
	}

	if !strings.Contains(strings.Join(spec.ProxyArgs, " "), "--proxy-mode=nftables") {
		t.Errorf("proxy args: %v", spec.ProxyArgs)
	}

	st := cosistate.New()
	c := serve(t, st)
	ctx := ctxTimeout(t)

	spec.CNIName = "none"
	must(t, st.SetBootstrapManifests(spec))
	must(t, st.SetMachineConfig(cp))

	bmc, err := safe.ReaderGetByID[*k8s.BootstrapManifestsConfig](ctx, c.COSI, k8s.BootstrapManifestsConfigID)
	must(t, err)

	if bmc.TypedSpec().CNIName != "none" {
		t.Fatalf("CNI %q", bmc.TypedSpec().CNIName)
	}

	mc, err := safe.StateGetByID[*configres.MachineConfig](ctx, c.COSI, configres.ActiveID)
	must(t, err)

	if mc.Config().Machine().Type() != machine.TypeControlPlane || mc.Config().Cluster().Name() != "lab" {
		t.Fatalf("machine config: %v %v", mc.Config().Machine().Type(), mc.Config().Cluster().Name())
	}

	mt, err := safe.StateGetByID[*configres.MachineType](ctx, c.COSI, configres.MachineTypeID)
	must(t, err)

	if mt.MachineType() != machine.TypeControlPlane {
		t.Fatalf("machine type %v", mt.MachineType())
	}

	must(t, st.SetMachineConfig(cp)) // an update of the same configuration
	must(t, st.SetBootstrapManifests(nil))
	must(t, st.SetMachineConfig(nil))

	if _, err := safe.StateGetByID[*configres.MachineConfig](ctx, c.COSI, configres.ActiveID); client.StatusCode(err) == 0 {
		t.Fatal("machine config still served")
	}
}
