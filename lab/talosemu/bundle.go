package talosemu

import (
	"fmt"
	"sync"
	"time"

	"github.com/siderolabs/crypto/x509"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/role"
)

// What Bundle generates configurations for: the Talos v1.10/v1.11 single-document v1alpha1
// configuration this project targets.
const (
	BundleClusterName       = "talosemu"
	BundleEndpoint          = "https://talosemu.invalid:6443"
	BundleKubernetesVersion = "1.34.1"
	BundleContract          = "v1.11"
)

// Bundle is a cluster's secrets (PKI and tokens) with helpers to generate its machine
// configurations and client configuration. Generating the secrets takes 0.4–3 s; tests share one
// through SharedBundle.
type Bundle struct {
	Secrets  *secrets.Bundle
	Contract *config.VersionContract

	adminCert *x509.PEMEncodedCertificateAndKey
}

var shared struct {
	once   sync.Once
	bundle *Bundle
	err    error
}

// SharedBundle returns the bundle generated on first use by this process (test binary).
func SharedBundle() (*Bundle, error) {
	shared.once.Do(func() { shared.bundle, shared.err = NewBundle() })

	return shared.bundle, shared.err
}

// NewBundle generates new cluster secrets for contract BundleContract.
func NewBundle() (*Bundle, error) {
	contract, err := config.ParseContractFromVersion(BundleContract)
	if err != nil {
		return nil, fmt.Errorf("talosemu: contract: %w", err)
	}

	s, err := secrets.NewBundle(secrets.NewFixedClock(time.Now()), contract)
	if err != nil {
		return nil, fmt.Errorf("talosemu: generating secrets: %w", err)
	}

	admin, err := s.GenerateTalosAPIClientCertificate(role.MakeSet(role.Admin))
	if err != nil {
		return nil, fmt.Errorf("talosemu: generating the admin client certificate: %w", err)
	}

	return &Bundle{Secrets: s, Contract: contract, adminCert: admin}, nil
}

// MachineConfig generates the configuration of a machine of type t (machine.TypeControlPlane or
// machine.TypeWorker) for cluster BundleClusterName at BundleEndpoint, installing to /dev/sda,
// with patches applied in order (strategic-merge YAML or JSON6902, as configpatcher.LoadPatches
// reads them, e.g. "machine:\n  network:\n    hostname: cp-1\n").
func (b *Bundle) MachineConfig(t machine.Type, patches ...string) ([]byte, error) {
	in, err := generate.NewInput(BundleClusterName, BundleEndpoint, BundleKubernetesVersion,
		generate.WithVersionContract(b.Contract),
		generate.WithSecretsBundle(b.Secrets),
		generate.WithInstallDisk("/dev/sda"),
	)
	if err != nil {
		return nil, fmt.Errorf("talosemu: generate input: %w", err)
	}

	cfg, err := in.Config(t)
	if err != nil {
		return nil, fmt.Errorf("talosemu: generating the %s config: %w", t, err)
	}

	if len(patches) > 0 {
		loaded, err := configpatcher.LoadPatches(patches)
		if err != nil {
			return nil, fmt.Errorf("talosemu: loading patches: %w", err)
		}

		out, err := configpatcher.Apply(configpatcher.WithConfig(cfg), loaded)
		if err != nil {
			return nil, fmt.Errorf("talosemu: applying patches: %w", err)
		}

		if cfg, err = out.Config(); err != nil {
			return nil, fmt.Errorf("talosemu: patched config: %w", err)
		}
	}

	return cfg.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
}

// ClientConfig is a talosconfig for endpoints with an os:admin client certificate from the OS CA,
// what `talosctl gen config` writes and the Talos provider's client_configuration holds.
func (b *Bundle) ClientConfig(endpoints ...string) *clientconfig.Config {
	return clientconfig.NewConfig(BundleClusterName, endpoints, b.Secrets.Certs.OS.Crt, b.adminCert)
}
