package provider

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pconfig "github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/flux"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretstest"
)

// registration is one child resource the component registered with the (mock) engine.
type registration struct {
	Type, Name, Parent string
	Custom             bool
	Inputs             property.Map
	Dependencies       []string
	// PropertyDependencies are the resources each input comes from, by property.
	PropertyDependencies map[string][]string
	AdditionalSecrets    []string
	IgnoreChanges        []string
	ReplaceWith          []string
	DeleteBeforeReplace  bool
	Provider             string
	Version              string
	URN                  string
}

// invoke is one function call (getConfiguration) the component made.
type invoke struct {
	Token string
	Args  property.Map
}

// recorder is a mock Pulumi engine that records registrations and answers like the proxmoxve
// and talos providers would, with deterministic fake values.
type recorder struct {
	// config is the stack's configuration the component sees (e.g. proxmoxve:endpoint).
	config  map[string]string
	mu      sync.Mutex
	regs    []registration
	invokes []invoke
	nextVM  int
	// proxmox answers the proxmoxve inventory functions (default: labInventory).
	proxmox *mockInventory
	// inventoryWaits, when set, holds the VM list of the inventory until the machine secrets are
	// registered (or 2 s pass); inventoryWaited says whether they came first.
	inventoryWaits  chan struct{}
	inventoryWaited bool
	secretsOnce     sync.Once
	// recordedKubernetes, when set, is the version the state's KubernetesRecord holds: the engine
	// answers with it when the record ignores changes to kubernetesVersion, as for a record in the
	// state (a create, with no record in the state, takes the input).
	recordedKubernetes string
	// recordedName, when set, is the cluster name the state's KubernetesRecord holds, answered
	// likewise when the record ignores changes to clusterName.
	recordedName string
}

// mockInventory is what the mock Proxmox cluster holds.
type mockInventory struct {
	Nodes       []string
	Datastores  map[string][]string // datastore → content types, the same on every node
	VMs         []map[string]any
	PCIMappings []string
}

// labInventory is the lab's inventory: three hosts, local (import, iso, snippets), local-lvm
// (images, rootdir) and a shared nfs, the PCI mapping gpu, no VM.
func labInventory() *mockInventory {
	return &mockInventory{
		Nodes:       []string{"pve1", "pve2", "pve3"},
		Datastores:  map[string][]string{"local": {"iso", "import", "snippets", "vztmpl"}, "local-lvm": {"images", "rootdir"}, "nfs": {"iso", "import", "images"}},
		PCIMappings: []string{"gpu"},
	}
}

func (m *mockInventory) answer(token string, args property.Map) (property.Map, bool) {
	switch token {
	case "proxmoxve:Cluster/getNodes:getNodes":
		return property.NewMap(map[string]property.Value{"names": property.New(strs(m.Nodes))}), true
	case "proxmoxve:Storage/getDatastores:getDatastores":
		var stores []property.Value
		for id, content := range m.Datastores {
			stores = append(stores, property.New(map[string]property.Value{
				"id": property.New(id), "nodeName": property.New(args.Get("nodeName").AsString()),
				"type": property.New("dir"), "contentTypes": property.New(strs(content)),
			}))
		}

		return property.NewMap(map[string]property.Value{"datastores": property.New(stores)}), true
	case "proxmoxve:VM/getVirtualMachines:getVirtualMachines":
		var vms []property.Value
		for _, v := range m.VMs {
			vms = append(vms, property.New(map[string]property.Value{
				"vmId": property.New(float64(v["vmId"].(int))), "name": property.New(v["name"].(string)),
				"nodeName": property.New(v["nodeName"].(string)), "tags": property.New(strs(v["tags"].([]string))),
			}))
		}

		return property.NewMap(map[string]property.Value{"vms": property.New(vms)}), true
	case "proxmoxve:Hardware/getMappings:getMappings":
		return property.NewMap(map[string]property.Value{"ids": property.New(strs(m.PCIMappings))}), true
	}

	return property.Map{}, false
}

func strs(items []string) []property.Value {
	out := make([]property.Value, len(items))
	for i, s := range items {
		out[i] = property.New(s)
	}

	return out
}

func (r *recorder) monitor() *integration.MockResourceMonitor {
	return &integration.MockResourceMonitor{
		NewResourceF: r.newResource,
		CallF:        r.call,
	}
}

func (r *recorder) newResource(args integration.MockResourceArgs) (string, property.Map, error) {
	r.mu.Lock()
	defer r.mu.Unlock()

	reg := registration{Type: string(args.TypeToken), Name: args.Name, Custom: args.Custom, Inputs: args.Inputs}
	if rpc := args.RegisterRPC; rpc != nil {
		reg.Parent = rpc.GetParent()
		reg.Dependencies = rpc.GetDependencies()
		reg.PropertyDependencies = map[string][]string{}

		for prop, deps := range rpc.GetPropertyDependencies() {
			reg.PropertyDependencies[prop] = deps.GetUrns()
		}
		reg.AdditionalSecrets = rpc.GetAdditionalSecretOutputs()
		reg.IgnoreChanges = rpc.GetIgnoreChanges()
		reg.ReplaceWith = rpc.GetReplaceWith()
		reg.DeleteBeforeReplace = rpc.GetDeleteBeforeReplace()
		reg.Provider = rpc.GetProvider()
		reg.Version = rpc.GetVersion()
	}
	r.regs = append(r.regs, reg)

	if reg.Type == "talos:machine/secrets:Secrets" && r.inventoryWaits != nil {
		r.secretsOnce.Do(func() { close(r.inventoryWaits) })
	}

	out := args.Inputs
	id := args.Name + "-id"

	switch reg.Type {
	case "proxmoxve:Download/file:File":
		id = fmt.Sprintf("%s:%s/%s", args.Inputs.Get("datastoreId").AsString(), args.Inputs.Get("contentType").AsString(),
			args.Inputs.Get("fileName").AsString())
	case "proxmoxve:VM/virtualMachine:VirtualMachine":
		vmID := 1000 + r.nextVM
		if v, ok := args.Inputs.GetOk("vmId"); ok && v.IsNumber() {
			vmID = int(v.AsNumber())
		}
		r.nextVM++
		id = fmt.Sprint(vmID)
		out = out.Set("vmId", property.New(float64(vmID)))
		out = out.Set("networkInterfaceNames", property.New([]property.Value{property.New("lo"), property.New("eth0")}))
		out = out.Set("ipv4Addresses", property.New([]property.Value{
			property.New([]property.Value{property.New("127.0.0.1")}),
			property.New([]property.Value{property.New(fmt.Sprintf("192.168.50.%d", 10+r.nextVM))}),
		}))
		out = out.Set("networkDevices", property.New([]property.Value{property.New(property.NewMap(map[string]property.Value{
			"macAddress": property.New(fmt.Sprintf("BC:24:11:00:00:%02X", r.nextVM)),
		}))}))
	case "talos-proxmox:lifecycle:KubernetesRecord":
		if r.recordedKubernetes != "" && slices.Contains(reg.IgnoreChanges, "kubernetesVersion") {
			out = out.Set("kubernetesVersion", property.New(r.recordedKubernetes))
		}

		if r.recordedName != "" && slices.Contains(reg.IgnoreChanges, "clusterName") {
			out = out.Set("clusterName", property.New(r.recordedName))
		}
	case "talos-proxmox:lifecycle:NodeAddress":
		// As the scan would find it: the agent's report when there is one.
		out = out.Set("address", property.New(args.Inputs.Get("agentAddress").AsString()))
	case "talos:machine/secrets:Secrets":
		out = out.Set("machineSecrets", mockMachineSecrets())
		out = out.Set("clientConfiguration", mustProperty(`{"caCertificate":"ca","clientCertificate":"crt","clientKey":"key"}`))
	case "talos:cluster/kubeconfig:Kubeconfig":
		out = out.Set("kubeconfigRaw", property.New("apiVersion: v1\nkind: Config\n"))
	case "talos-proxmox:lifecycle:ClientCredentials", "talos-proxmox:lifecycle:ClusterHealth":
		// As issued: the mock engine would otherwise leave these secrets unknown at preview.
		out = out.Set("kubeconfig", property.New("apiVersion: v1\nkind: Config\n").WithSecret(true))
		out = out.Set("talosconfig", property.New("context: x\n").WithSecret(true))
	case "talos:imageFactory/schematic:Schematic":
		id = "schematic-id"
	case "talos-proxmox:lifecycle:DeployKey":
		// As the resource makes it: a real key pair.
		private, public, err := flux.GenerateDeployKey()
		if err != nil {
			return "", out, err
		}

		out = out.Set("privateKey", property.New(private).WithSecret(true)).Set("publicKey", property.New(public))
	case "proxmoxve:User/token:Token":
		out = out.Set("value", property.New(args.Inputs.Get("userId").AsString()+"!"+args.Inputs.Get("tokenName").AsString()+"=secret-of-the-token").WithSecret(true))
	}

	return id, out, nil
}

func (r *recorder) call(args integration.MockCallArgs) (property.Map, error) {
	if r.inventoryWaits != nil && args.Token == "proxmoxve:VM/getVirtualMachines:getVirtualMachines" {
		select {
		case <-r.inventoryWaits:
			r.mu.Lock()
			r.inventoryWaited = true
			r.mu.Unlock()
		case <-time.After(2 * time.Second):
		}
	}

	r.mu.Lock()
	r.invokes = append(r.invokes, invoke{Token: string(args.Token), Args: args.Args})
	inv := r.proxmox
	r.mu.Unlock()

	if inv == nil {
		inv = labInventory()
	}

	if out, ok := inv.answer(string(args.Token), args.Args); ok {
		return out, nil
	}

	switch args.Token {
	case "talos:machine/getConfiguration:getConfiguration":
		var patches []string
		for _, v := range args.Args.Get("configPatches").AsArray().All {
			patches = append(patches, v.AsString())
		}

		return property.NewMap(map[string]property.Value{
			"machineConfiguration": property.New("version: v1alpha1\n# " + strings.Join(patches, "\n# ")),
		}), nil
	case "talos:client/getConfiguration:getConfiguration":
		return property.NewMap(map[string]property.Value{"talosConfig": property.New("context: x\n")}), nil
	}

	return property.Map{}, nil
}

func (r *recorder) custom() []registration {
	r.mu.Lock()
	defer r.mu.Unlock()

	var out []registration
	for _, reg := range r.regs {
		if reg.Custom {
			out = append(out, reg)
		}
	}

	return out
}

func (r *recorder) ofType(typ string) []registration {
	var out []registration
	for _, reg := range r.custom() {
		if reg.Type == typ {
			out = append(out, reg)
		}
	}

	return out
}

func (r *recorder) named(name string) registration {
	for _, reg := range r.custom() {
		if reg.Name == name {
			return reg
		}
	}

	return registration{}
}

func mustProperty(text string) property.Value {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		panic(err)
	}

	return resource.FromResourcePropertyValue(resource.NewPropertyValue(v))
}

// inputsFromJSON builds Construct inputs from JSON, as a language SDK would send them.
func inputsFromJSON(t testing.TB, text string) property.Map {
	t.Helper()

	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}

	return resource.FromResourcePropertyMap(resource.NewPropertyMapFromMap(m))
}

// construct runs the component through pulumi-go-provider's in-memory engine.
func construct(t *testing.T, r *recorder, name string, inputs property.Map) (p.ConstructResponse, error) {
	t.Helper()

	return constructIn(t, r, name, inputs)
}

func constructB(b *testing.B, r *recorder, inputs property.Map) (p.ConstructResponse, error) {
	b.Helper()

	return constructIn(b, r, "bench", inputs)
}

func constructIn(tb testing.TB, r *recorder, name string, inputs property.Map) (p.ConstructResponse, error) {
	return constructAs(tb, r, name, inputs, false)
}

// constructAs constructs the component, as at preview when dryRun.
func constructAs(tb testing.TB, r *recorder, name string, inputs property.Map, dryRun bool) (p.ConstructResponse, error) {
	prov, err := Provider()
	if err != nil {
		tb.Fatal(err)
	}

	server, err := integration.NewServer(tb.Context(), Name, semver.MustParse(Version),
		integration.WithProvider(prov), integration.WithMocks(r.monitor()))
	if err != nil {
		tb.Fatal(err)
	}

	cfg := map[pconfig.Key]string{}
	for k, v := range r.config {
		cfg[pconfig.MustParseKey(k)] = v
	}

	return server.Construct(p.ConstructRequest{
		Urn:    resource.URN("urn:pulumi:stack::project::" + ClusterToken + "::" + name),
		Inputs: inputs,
		DryRun: dryRun,
		Config: cfg,
	})
}

// mockMachineSecrets is the tests' real secrets bundle (secretstest) in the talos provider's form,
// so the component generates real configurations from it.
var mockMachineSecrets = sync.OnceValue(func() property.Value {
	s := machineconfig.SecretsFrom(secretstest.Bundle())
	ck := func(name string) property.Value {
		return property.New(map[string]property.Value{"cert": property.New(s.Certs[name].Cert), "key": property.New(s.Certs[name].Key)})
	}

	return property.New(map[string]property.Value{
		"certs": property.New(map[string]property.Value{
			"etcd": ck("etcd"), "k8s": ck("k8s"), "k8sAggregator": ck("k8sAggregator"), "os": ck("os"),
			"k8sServiceaccount": property.New(map[string]property.Value{"key": property.New(s.ServiceAccountKey)}),
		}),
		"cluster": property.New(map[string]property.Value{"id": property.New(s.ClusterID), "secret": property.New(s.ClusterSecret)}),
		"secrets": property.New(map[string]property.Value{
			"bootstrapToken": property.New(s.BootstrapToken), "secretboxEncryptionSecret": property.New(s.SecretboxEncryptionSecret),
		}),
		"trustdinfo": property.New(map[string]property.Value{"token": property.New(s.TrustdToken)}),
	})
})
