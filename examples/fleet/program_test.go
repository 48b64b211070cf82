package main

import (
	"encoding/base64"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider"
)

// mocks counts the child resources by type and answers the talos provider's Secrets resource with
// a real secrets bundle: the component validates every machine configuration it generates.
type mocks struct {
	mu    sync.Mutex
	types map[string]int
}

func (m *mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	m.types[args.TypeToken]++
	m.mu.Unlock()

	out := args.Inputs.Copy()
	if args.TypeToken == "talos:machine/secrets:Secrets" {
		out["machineSecrets"] = machineSecrets()
	}

	return args.Name + "-id", out, nil
}

func (m *mocks) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

var machineSecrets = sync.OnceValue(func() resource.PropertyValue {
	b, err := secrets.NewBundle(secrets.NewFixedClock(time.Unix(1_700_000_000, 0)), config.TalosVersion1_11)
	if err != nil {
		panic(err)
	}

	enc := base64.StdEncoding.EncodeToString
	pair := func(c *x509.PEMEncodedCertificateAndKey) map[string]any {
		return map[string]any{"cert": enc(c.Crt), "key": enc(c.Key)}
	}

	return resource.NewPropertyValue(map[string]any{
		"certs": map[string]any{
			"etcd": pair(b.Certs.Etcd), "k8s": pair(b.Certs.K8s), "k8sAggregator": pair(b.Certs.K8sAggregator), "os": pair(b.Certs.OS),
			"k8sServiceaccount": map[string]any{"key": enc(b.Certs.K8sServiceAccount.Key)},
		},
		"cluster":    map[string]any{"id": b.Cluster.ID, "secret": b.Cluster.Secret},
		"secrets":    map[string]any{"bootstrapToken": b.Secrets.BootstrapToken, "secretboxEncryptionSecret": b.Secrets.SecretboxEncryptionSecret},
		"trustdinfo": map[string]any{"token": b.TrustdInfo.Token},
	})
})

// TestExampleInventoryBuildsEveryCluster runs each cluster of fleet.yaml through the component
// with mocked children: its inputs pass the component's validation and give one VM per node.
// Cilium is left out: its chart comes from the network (the lab test renders it).
func TestExampleInventoryBuildsEveryCluster(t *testing.T) {
	t.Setenv(provider.CatalogueCheckEnv, "off") // mocks: no Image Factory to ask

	clusters, err := LoadInventory("fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range clusters {
		t.Run(c.Name, func(t *testing.T) {
			c.Cilium = nil
			m := &mocks{types: map[string]int{}}

			if err := pulumi.RunErr(program(c), pulumi.WithMocks(project, c.Name, m)); err != nil {
				t.Fatal(err)
			}

			if got := m.types["proxmoxve:VM/virtualMachine:VirtualMachine"]; got != len(c.Nodes) {
				t.Errorf("%d VMs, want %d", got, len(c.Nodes))
			}
		})
	}
}

// TestClusterArgsLeaveDefaultsToTheComponent: a field the inventory leaves empty is unset in the
// component's inputs, not a zero value.
func TestClusterArgsLeaveDefaultsToTheComponent(t *testing.T) {
	args := clusterArgs(Cluster{Name: "a", Nodes: map[string]Node{"cp-1": {HostNode: "pve1", Role: "controlplane", MemoryMib: 8192}}})

	n := args.Nodes["cp-1"]
	if n.Cpu != nil || n.DiskSizeGib != nil || n.MemoryMib == nil || *n.MemoryMib != 8192 {
		t.Errorf("node = %+v", n)
	}

	if args.Network.PrefixLength != nil || args.Cilium != nil {
		t.Errorf("network = %+v, cilium = %+v", args.Network, args.Cilium)
	}
}
