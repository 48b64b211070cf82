// Package sdkcheck uses the generated Go SDK the way a program does and checks what it sends to
// the engine: plain inputs arrive as plain values, inputs that accept outputs keep their secrecy.
// The Node.js and Python counterparts are type-checked by check.sh.
package sdkcheck

import (
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/talos-proxmox/pulumi-talos-proxmox/sdk/go/talosproxmox"
)

// recordingMocks answers every registration with the inputs as outputs and keeps the inputs of
// the component.
type recordingMocks struct {
	mu     sync.Mutex
	args   pulumi.MockResourceArgs
	called bool
}

func (m *recordingMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	if args.TypeToken == "talos-proxmox:index:TalosProxmoxCluster" {
		m.mu.Lock()
		m.args, m.called = args, true
		m.mu.Unlock()
	}
	return args.Name + "-id", args.Inputs, nil
}

func (m *recordingMocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// newCluster declares a cluster with every kind of input the schema has: plain scalars, a plain
// map of plain objects, plain nested objects and lists, and inputs that take (secret) outputs.
func newCluster(ctx *pulumi.Context) (*talosproxmox.TalosProxmoxCluster, error) {
	return talosproxmox.NewTalosProxmoxCluster(ctx, "lab", &talosproxmox.TalosProxmoxClusterArgs{
		ClusterName:  "homelab",
		TalosVersion: "v1.11.5",
		Vip:          pulumi.StringRef("10.0.0.10"),
		Network: &talosproxmox.NetworkArgs{
			Gateway:      pulumi.StringRef("10.0.0.1"),
			PrefixLength: pulumi.IntRef(24),
			Nameservers:  []string{"1.1.1.1"},
		},
		Image: &talosproxmox.ImageArgs{Extensions: []string{"siderolabs/qemu-guest-agent"}},
		Nodes: map[string]talosproxmox.NodeArgs{
			"cp-1": {
				HostNode:      "pve1",
				Role:          "controlplane",
				Ip:            pulumi.StringRef("10.0.0.11"),
				Cpu:           pulumi.IntRef(4),
				Labels:        map[string]string{"tier": "control"},
				DataDisks:     []talosproxmox.DataDiskArgs{{SizeGib: 50, MountPath: pulumi.StringRef("/var/mnt/data")}},
				ConfigPatches: pulumi.StringArray{pulumi.ToSecret(pulumi.String("machine: {}")).(pulumi.StringOutput)},
			},
			"worker-1": {HostNode: "pve2", Role: "worker", Ip: pulumi.StringRef("10.0.0.21")},
		},
		ConfigPatches: pulumi.ToSecret(pulumi.StringArray{pulumi.String("cluster: {}")}).(pulumi.StringArrayOutput),
		InlineManifests: []talosproxmox.InlineManifestArgs{
			{Name: "pool", Contents: pulumi.ToSecret(pulumi.String("kind: ConfigMap")).(pulumi.StringOutput)},
		},
	})
}

func TestGoSDKSendsPlainAndSecretInputs(t *testing.T) {
	mocks := &recordingMocks{}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		cluster, err := newCluster(ctx)
		if err != nil {
			return err
		}
		ctx.Export("kubeconfig", cluster.Kubeconfig)
		ctx.Export("nodes", cluster.Nodes)
		return nil
	}, pulumi.WithMocks("sdkcheck", "test", mocks))
	if err != nil {
		t.Fatal(err)
	}
	if !mocks.called {
		t.Fatal("the component was never registered")
	}
	if rpc := mocks.args.RegisterRPC; !rpc.GetRemote() || rpc.GetCustom() {
		t.Errorf("registered with remote=%v custom=%v, want a remote component", rpc.GetRemote(), rpc.GetCustom())
	}
	if got, want := mocks.args.RegisterRPC.GetVersion(), schemaVersion(t); got != want {
		t.Errorf("plugin version %q, want the schema's %q", got, want)
	}

	in := mocks.args.Inputs
	wantString(t, in["clusterName"], "homelab")
	wantString(t, in["vip"], "10.0.0.10")
	wantString(t, in["network"].ObjectValue()["gateway"], "10.0.0.1")

	nodes := in["nodes"]
	if !nodes.IsObject() || len(nodes.ObjectValue()) != 2 {
		t.Fatalf("nodes = %v, want a plain object with two nodes", nodes)
	}
	cp := nodes.ObjectValue()["cp-1"].ObjectValue()
	wantString(t, cp["hostNode"], "pve1")
	if cpu := cp["cpu"]; !cpu.IsNumber() || cpu.NumberValue() != 4 {
		t.Errorf("nodes.cp-1.cpu = %v, want 4", cpu)
	}
	wantString(t, cp["labels"].ObjectValue()["tier"], "control")
	wantString(t, cp["dataDisks"].ArrayValue()[0].ObjectValue()["mountPath"], "/var/mnt/data")
	if patch := cp["configPatches"].ArrayValue()[0]; !patch.IsSecret() {
		t.Errorf("nodes.cp-1.configPatches[0] = %v, want a secret", patch)
	}
	if _, ok := nodes.ObjectValue()["worker-1"].ObjectValue()["configPatches"]; ok {
		t.Error("nodes.worker-1.configPatches is sent although unset")
	}
	if patches := in["configPatches"]; !patches.IsSecret() {
		t.Errorf("configPatches = %v, want a secret list", patches)
	}
	manifest := in["inlineManifests"].ArrayValue()[0].ObjectValue()
	wantString(t, manifest["name"], "pool")
	if !manifest["contents"].IsSecret() {
		t.Errorf("inlineManifests[0].contents = %v, want a secret", manifest["contents"])
	}
}

// wantString fails unless v is the plain (known, not secret) string want.
func wantString(t *testing.T, v resource.PropertyValue, want string) {
	t.Helper()
	if !v.IsString() || v.StringValue() != want {
		t.Errorf("got %v, want the plain string %q", v, want)
	}
}

// schemaVersion is the version in schema.json, which `make schema` takes from the plugin, which
// takes it from provider/VERSION.
func schemaVersion(t *testing.T) string {
	t.Helper()

	raw, err := os.ReadFile("../../schema.json")
	if err != nil {
		t.Fatal(err)
	}

	var s struct{ Version string }
	if err := json.Unmarshal(raw, &s); err != nil || s.Version == "" {
		t.Fatalf("schema.json has no version: %v", err)
	}

	return s.Version
}
