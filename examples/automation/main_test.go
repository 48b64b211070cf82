package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/chartrepo"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider"
)

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
		// Real secrets: the component generates and validates every configuration with them.
		out["machineSecrets"] = machineSecrets()
	}

	return args.Name + "-id", out, nil
}

// machineSecrets is a real secrets bundle in the talos provider's form.
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

func (m *mocks) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

// TestProgramBuildsTheCluster runs the inline program with mocked children and default config,
// except that Cilium's chart comes from a repository on loopback.
func TestProgramBuildsTheCluster(t *testing.T) {
	dir := t.TempDir()

	archive, err := chartrepo.CiliumArchive(dir)
	if err != nil {
		t.Fatal(err)
	}

	repo, err := chartrepo.Repository(t.Context(), archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = repo.Close() }()

	t.Setenv("TALOS_PROXMOX_HELM_CACHE", filepath.Join(dir, "cache"))
	t.Setenv(provider.CatalogueCheckEnv, "off") // mocks: no Image Factory to ask
	t.Setenv("PULUMI_CONFIG", `{"`+project+`:ciliumRepository": "`+repo.URL+`"}`)

	m := &mocks{types: map[string]int{}}

	if err := pulumi.RunErr(program, pulumi.WithMocks(project, "homelab", m)); err != nil {
		t.Fatal(err)
	}

	if got := m.types["proxmoxve:VM/virtualMachine:VirtualMachine"]; got != 5 {
		t.Errorf("%d VMs, want 5", got)
	}

	if got := m.types["talos-proxmox:lifecycle:EtcdBootstrap"]; got != 1 {
		t.Errorf("%d bootstraps, want 1", got)
	}
}

func TestKubeconfigIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "homelab.kubeconfig")

	// An existing, world-readable file is replaced by a private one.
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}

	err := writeKubeconfig(dir, "homelab", auto.OutputMap{
		"kubeconfig": {Value: "apiVersion: v1\nkind: Config\n", Secret: true},
		"endpoint":   {Value: "https://192.168.10.10:6443"},
	})
	if err != nil {
		t.Fatal(err)
	}

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode().Perm())
	}

	if b, _ := os.ReadFile(path); string(b) != "apiVersion: v1\nkind: Config\n" {
		t.Fatalf("contents = %q", b)
	}

	if err := writeKubeconfig(dir, "homelab", auto.OutputMap{}); err == nil {
		t.Fatal("no error without a kubeconfig output")
	}
}
