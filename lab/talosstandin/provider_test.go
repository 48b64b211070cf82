package talosstandin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/schemas"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosstandin"
)

func server(t *testing.T) integration.Server {
	t.Helper()

	prov, err := talosstandin.New()
	if err != nil {
		t.Fatal(err)
	}

	s, err := integration.NewServer(t.Context(), "talos", semver.MustParse("0.7.1"), integration.WithProvider(prov))
	if err != nil {
		t.Fatal(err)
	}

	return s
}

// outputsInSchema fails on any output name the published schema does not declare.
func outputsInSchema(t *testing.T, token string, props property.Map) {
	t.Helper()

	sch, err := schemas.Talos()
	if err != nil {
		t.Fatal(err)
	}

	for k := range props.All {
		if _, ok := sch.Resources[token].Properties[k]; !ok {
			t.Errorf("%s returns %q, which the published schema does not have", token, k)
		}
	}
}

func urn(token, name string) resource.URN {
	return resource.URN("urn:pulumi:test::lab::" + token + "::" + name)
}

func TestCheckRejectsWhatTheSchemaDoesNot(t *testing.T) {
	t.Parallel()

	s := server(t)

	resp, err := s.Check(p.CheckRequest{
		Urn: urn(talosstandin.TokenBootstrap, "b"),
		Inputs: property.NewMap(map[string]property.Value{
			"node":     property.New("127.0.0.1"),
			"nodeName": property.New("x"),
		}),
	})
	if err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, f := range resp.Failures {
		got = append(got, f.Property)
	}

	if strings.Join(got, ",") != "nodeName,clientConfiguration" {
		t.Fatalf("failures on %v, want the unknown nodeName and the missing clientConfiguration", got)
	}
}

// TestApplyAndBootstrapAgainstEmulatedNodes drives the stand-in's resources against an emulated
// node: a config Talos rejects fails at once (InvalidArgument is terminal), a valid one applies
// through the maintenance API, the bootstrap succeeds once and a second one fails at once.
func TestApplyAndBootstrapAgainstEmulatedNodes(t *testing.T) {
	t.Parallel()

	s := server(t)

	node, err := talosemu.Start(t.Context(), talosemu.Options{Address: "127.0.6.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close() //nolint:errcheck

	secrets, err := s.Create(p.CreateRequest{
		Urn:        urn(talosstandin.TokenSecrets, "s"),
		Properties: property.NewMap(map[string]property.Value{"talosVersion": property.New("v1.11")}),
	})
	if err != nil {
		t.Fatal(err)
	}

	if !secrets.Properties.Get("machineSecrets").Secret() || !secrets.Properties.Get("clientConfiguration").Secret() {
		t.Error("machine secrets and client configuration must be secret outputs")
	}

	outputsInSchema(t, talosstandin.TokenSecrets, secrets.Properties)

	cfg, err := s.Invoke(p.InvokeRequest{
		Token: talosstandin.TokenGetConfiguration,
		Args: property.NewMap(map[string]property.Value{
			"clusterName":     property.New("lab"),
			"clusterEndpoint": property.New("https://127.0.6.1:6443"),
			"machineType":     property.New("controlplane"),
			"machineSecrets":  secrets.Properties.Get("machineSecrets"),
			"talosVersion":    property.New("v1.11"),
		}),
	})
	if err != nil || len(cfg.Failures) > 0 {
		t.Fatalf("getConfiguration: %v %v", err, cfg.Failures)
	}

	sch, _ := schemas.Talos()
	for k := range cfg.Return.All {
		if _, ok := sch.Functions[talosstandin.TokenGetConfiguration].Outputs.Properties[k]; !ok {
			t.Errorf("getConfiguration returns %q, which the published schema does not have", k)
		}
	}

	apply := func(patch string) error {
		_, err := s.Create(p.CreateRequest{
			Urn: urn(talosstandin.TokenConfigurationApply, "a"),
			Properties: property.NewMap(map[string]property.Value{
				"clientConfiguration":       secrets.Properties.Get("clientConfiguration"),
				"machineConfigurationInput": cfg.Return.Get("machineConfiguration"),
				"node":                      property.New("127.0.6.1"),
				"configPatches":             property.New([]property.Value{property.New(patch)}),
				"timeouts":                  property.New(property.NewMap(map[string]property.Value{"create": property.New("20s")})),
			}),
		})

		return err
	}

	start := time.Now()
	if err := apply("machine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [300.1.1.1/24]\n"); err == nil || !strings.Contains(err.Error(), "InvalidArgument") {
		t.Fatalf("an invalid configuration: err = %v, want InvalidArgument", err)
	}

	if time.Since(start) > 10*time.Second {
		t.Errorf("InvalidArgument was retried (%v): it must be terminal", time.Since(start))
	}

	if err := apply("machine:\n  network:\n    hostname: cp-1\n"); err != nil {
		t.Fatal(err)
	}

	if err := node.WaitState(t.Context(), talosemu.StateInstalled); err != nil {
		t.Fatal(err)
	}

	boot := p.CreateRequest{
		Urn: urn(talosstandin.TokenBootstrap, "b"),
		Properties: property.NewMap(map[string]property.Value{
			"clientConfiguration": secrets.Properties.Get("clientConfiguration"),
			"node":                property.New("127.0.6.1"),
			"timeouts":            property.New(property.NewMap(map[string]property.Value{"create": property.New("20s")})),
		}),
	}

	booted, err := s.Create(boot)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}

	outputsInSchema(t, talosstandin.TokenBootstrap, booted.Properties)

	kc, err := s.Create(p.CreateRequest{
		Urn: urn(talosstandin.TokenKubeconfig, "k"),
		Properties: property.NewMap(map[string]property.Value{
			"clientConfiguration": secrets.Properties.Get("clientConfiguration"),
			"node":                property.New("127.0.6.1"),
		}),
	})
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}

	outputsInSchema(t, talosstandin.TokenKubeconfig, kc.Properties)

	if !strings.Contains(kc.Properties.Get("kubeconfigRaw").AsString(), "https://127.0.6.1:6443") || !kc.Properties.Get("kubeconfigRaw").Secret() {
		t.Error("kubeconfigRaw must be the secret admin kubeconfig for the cluster endpoint")
	}

	start = time.Now()
	if _, err := s.Create(boot); err == nil || !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatalf("a second bootstrap: err = %v, want AlreadyExists", err)
	}

	if time.Since(start) > 10*time.Second {
		t.Errorf("AlreadyExists was retried (%v)", time.Since(start))
	}
}
