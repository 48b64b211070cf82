package day2

import (
	"errors"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretstest"
)

func TestImageTag(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{
		"registry.k8s.io/kube-apiserver:v1.34.1":                 "kube-apiserver:v1.34.1",
		"mirror.local:5000/k8s/kube-apiserver:v1.33.5@sha256:ab": "kube-apiserver:v1.33.5",
		"kube-apiserver": "kube-apiserver",
	} {
		if got := imageTag(in); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", in, got, want)
		}
	}
}

// A TLS failure about certificates, either way, is a foreign CA; a node that is down is not.
func TestForeignCA(t *testing.T) {
	t.Parallel()

	for msg, want := range map[string]bool{
		`rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`: true,
		"remote error: tls: unknown certificate authority": true,
		"remote error: tls: bad certificate":               true,
		`connection error: desc = "transport: Error while dialing: dial tcp 10.0.0.11:50000: connect: connection refused"`: false,
		"context deadline exceeded": false,
	} {
		if got := foreignCA(errors.New(msg)); got != want {
			t.Errorf("foreignCA(%q) = %v", msg, got)
		}
	}
}

// A running configuration made from the bundle matches it; one made from other secrets names
// every CA and token that differs, for control planes and workers.
func TestSecretsMismatch(t *testing.T) {
	t.Parallel()

	own := machineconfig.SecretsFrom(secretstest.Bundle())

	other, err := secrets.NewBundle(secrets.NewClock(), config.TalosVersion1_11)
	if err != nil {
		t.Fatal(err)
	}

	for _, cp := range []bool{true, false} {
		cfg, err := machineconfig.Generate(machineconfig.Request{
			ClusterName: "lab", Endpoint: "https://10.0.0.10:6443", KubernetesVersion: "v1.34.1", Contract: "v1.11",
			ControlPlane: cp, Secrets: own,
		})
		if err != nil {
			t.Fatal(err)
		}

		if got, err := SecretsMismatch(cfg, own); err != nil || len(got) != 0 {
			t.Errorf("control plane %v, its own bundle: %v %v", cp, got, err)
		}

		want := "certs.k8s secrets.bootstraptoken"
		if cp {
			want = "certs.k8s certs.k8saggregator certs.etcd secrets.bootstraptoken"
		}

		if got, _ := SecretsMismatch(cfg, machineconfig.SecretsFrom(other)); strings.Join(got, " ") != want {
			t.Errorf("control plane %v, another bundle: %v, want %s", cp, got, want)
		}
	}
}
