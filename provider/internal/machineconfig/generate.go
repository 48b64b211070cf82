// Package machineconfig generates a node's Talos machine configuration in-process, with Talos'
// own machinery (the version pinned in go.mod, newer than the one inside the talos provider):
// generation for the cluster's configuration contract, then the component's and the user's
// patches, then Talos' own validation. The talos provider keeps the secrets, the apply, the
// bootstrap and the kubeconfig; it is given the configuration this package makes. It imports no
// Pulumi package.
package machineconfig

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/constants"
)

// Secrets are the talos provider's machine secrets (its `machineSecrets` output): certificates
// and keys base64-encoded PEM, the rest as Talos generates them.
type Secrets struct {
	ClusterID, ClusterSecret                  string
	BootstrapToken, SecretboxEncryptionSecret string
	AESCBCEncryptionSecret                    string
	TrustdToken                               string
	// Certificate and key pairs by name: etcd, k8s, k8sAggregator, os.
	Certs map[string]CertAndKey
	// ServiceAccountKey is the base64 PEM of the service account signing key.
	ServiceAccountKey string
}

// CertAndKey is a base64 PEM certificate and its key.
type CertAndKey struct{ Cert, Key string }

// Patch is one configuration patch and where it comes from, for error messages.
type Patch struct {
	// From names the patch as the user wrote it (e.g. "configPatches[1]") or the component's own.
	From string
	Text string
}

// Request is what a node's configuration is made from.
type Request struct {
	ClusterName string
	// Endpoint is the Kubernetes API URL.
	Endpoint          string
	KubernetesVersion string
	// Contract is the configuration contract (a Talos minor such as "v1.13"): the format the
	// cluster was created with, kept across OS upgrades.
	Contract     string
	ControlPlane bool
	Secrets      Secrets
	Patches      []Patch
}

// Generate returns the node's configuration as YAML, without comments, validated by Talos.
func Generate(r Request) (string, error) {
	vc, err := config.ParseContractFromVersion(r.Contract)
	if err != nil {
		return "", fmt.Errorf("configuration contract %q: %w", r.Contract, err)
	}

	b, err := bundles.get(r.Secrets, vc)
	if err != nil {
		return "", err
	}

	in, err := generate.NewInput(r.ClusterName, r.Endpoint, strings.TrimPrefix(r.KubernetesVersion, "v"),
		generate.WithVersionContract(vc),
		generate.WithSecretsBundle(b),
		// What the talos provider's getConfiguration sets (the component's patch replaces the
		// install disk and image).
		generate.WithClusterDiscovery(true),
		generate.WithDNSDomain(constants.DefaultDNSDomain),
		generate.WithInstallDisk("/dev/sda"),
	)
	if err != nil {
		return "", fmt.Errorf("generating the configuration: %w", err)
	}

	typ := machine.TypeWorker
	if r.ControlPlane {
		typ = machine.TypeControlPlane
	}

	cfg, err := in.Config(typ)
	if err != nil {
		return "", fmt.Errorf("generating the configuration: %w", err)
	}

	// One patch at a time, so an error names the patch that caused it.
	steps := []config.Provider{cfg}

	for _, p := range r.Patches {
		loaded, err := configpatcher.LoadPatch([]byte(p.Text))
		if err != nil {
			return "", fmt.Errorf("%s: %w", p.From, err)
		}

		out, err := configpatcher.Apply(configpatcher.WithConfig(cfg), []configpatcher.Patch{loaded})
		if err != nil {
			if form := strategicForm(p.Text); form != "" && strings.Contains(err.Error(), "JSON6902") {
				return "", fmt.Errorf("%s: %w; as a strategic merge:\n%s", p.From, explain(err), form)
			}

			return "", fmt.Errorf("%s: %w", p.From, explain(err))
		}

		if cfg, err = out.Config(); err != nil {
			return "", fmt.Errorf("%s: %w", p.From, explain(err))
		}

		steps = append(steps, cfg)
	}

	if _, err := cfg.ValidateAsClient(installMode{}); err != nil {
		return "", fmt.Errorf("talos rejects the configuration%s: %w", culprit(steps, r.Patches), explain(err))
	}

	return cfg.EncodeString(encoder.WithComments(encoder.CommentsDisabled))
}

// culprit names the first patch after which the configuration no longer validates (steps[i+1]
// is the configuration after patches[i]); only run once the whole configuration failed.
func culprit(steps []config.Provider, patches []Patch) string {
	if _, err := steps[0].ValidateAsClient(installMode{}); err != nil {
		return ""
	}

	for i, p := range patches {
		if _, err := steps[i+1].ValidateAsClient(installMode{}); err != nil {
			return " after " + p.From
		}
	}

	return ""
}

// installMode is the mode a Proxmox VM installs in.
type installMode struct{}

func (installMode) String() string        { return "metal" }
func (installMode) RequiresInstall() bool { return true }
func (installMode) InContainer() bool     { return false }

// explain adds what to do to the errors users hit most (issue threads of Talos and its
// Terraform provider).
func explain(err error) error {
	msg := err.Error()

	switch {
	case strings.Contains(msg, "JSON6902 patches are not supported for multi-document"):
		return fmt.Errorf("%w; from Talos v1.12 the configuration has several documents: write the patch as a strategic merge (YAML) instead", err)
	case strings.Contains(msg, "static hostname is already set"):
		return fmt.Errorf("%w; the component sets each node's hostname in a HostnameConfig document: remove machine.network.hostname from the patch (the node's name is its hostname)", err)
	case strings.Contains(msg, "is already set in v1alpha1 config"):
		return fmt.Errorf("%w; from configuration contract v1.14 Kubernetes settings live in their own documents (KubeletConfig, "+
			"KubeAPIServerConfig, KubeProxyConfig, KubeNodeConfig…): write the patch as that document, e.g. "+
			"\"apiVersion: v1alpha1\\nkind: KubeletConfig\\nextraArgs: {max-pods: \\\"200\\\"}\"", err)
	}

	return err
}

// bundleCache keeps checked bundles: checking one (parsing the CAs and the 4096-bit service
// account key) is three quarters of a node's generation, and every node of a cluster, in the
// configuration check and again for its apply, shares one.
type bundleCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*secrets.Bundle
}

var bundles = &bundleCache{m: map[[sha256.Size]byte]*secrets.Bundle{}}

func (c *bundleCache) get(s Secrets, vc *config.VersionContract) (*secrets.Bundle, error) {
	h := sha256.New()
	for _, v := range []string{s.ClusterID, s.ClusterSecret, s.BootstrapToken, s.SecretboxEncryptionSecret, s.AESCBCEncryptionSecret,
		s.TrustdToken, s.ServiceAccountKey, vc.String()} {
		_, _ = fmt.Fprintf(h, "%d:%s\n", len(v), v)
	}

	for _, k := range []string{"etcd", "k8s", "k8sAggregator", "os"} {
		_, _ = fmt.Fprintf(h, "%d:%s\n%d:%s\n", len(s.Certs[k].Cert), s.Certs[k].Cert, len(s.Certs[k].Key), s.Certs[k].Key)
	}

	var key [sha256.Size]byte
	copy(key[:], h.Sum(nil))

	c.mu.Lock()
	b, ok := c.m[key]
	c.mu.Unlock()

	if ok {
		return b, nil
	}

	b, err := s.Bundle(vc)
	if err != nil {
		return nil, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if len(c.m) >= 16 { // a plugin serves a few clusters; forget them all rather than grow
		clear(c.m)
	}

	c.m[key] = b

	return b, nil
}

// Bundle is the secrets as Talos' bundle, checked by Talos for contract vc.
func (s Secrets) Bundle(vc *config.VersionContract) (*secrets.Bundle, error) {
	dec := func(what, v string) ([]byte, error) {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("machine secrets: %s is not base64 PEM", what)
		}

		return b, nil
	}

	pair := func(name string) (*x509.PEMEncodedCertificateAndKey, error) {
		ck, ok := s.Certs[name]
		if !ok {
			return nil, fmt.Errorf("machine secrets: no %s certificate", name)
		}

		crt, err := dec(name+" certificate", ck.Cert)
		if err != nil {
			return nil, err
		}

		key, err := dec(name+" key", ck.Key)
		if err != nil {
			return nil, err
		}

		return &x509.PEMEncodedCertificateAndKey{Crt: crt, Key: key}, nil
	}

	b := &secrets.Bundle{
		// Certificates Talos issues from these CAs (none end up in the configuration) would
		// carry this time: fixed, so the configuration is the same on every run.
		Clock:      secrets.NewFixedClock(time.Unix(0, 0)),
		Cluster:    &secrets.Cluster{ID: s.ClusterID, Secret: s.ClusterSecret},
		TrustdInfo: &secrets.TrustdInfo{Token: s.TrustdToken},
		Secrets: &secrets.Secrets{
			BootstrapToken:            s.BootstrapToken,
			SecretboxEncryptionSecret: s.SecretboxEncryptionSecret,
			AESCBCEncryptionSecret:    s.AESCBCEncryptionSecret,
		},
		Certs: &secrets.Certs{},
	}

	var err error
	for name, dst := range map[string]**x509.PEMEncodedCertificateAndKey{
		"etcd": &b.Certs.Etcd, "k8s": &b.Certs.K8s, "k8sAggregator": &b.Certs.K8sAggregator, "os": &b.Certs.OS,
	} {
		if *dst, err = pair(name); err != nil {
			return nil, err
		}
	}

	sa, err := dec("service account key", s.ServiceAccountKey)
	if err != nil {
		return nil, err
	}

	b.Certs.K8sServiceAccount = &x509.PEMEncodedKey{Key: sa}

	if err := b.Validate(vc); err != nil {
		return nil, errors.Join(errors.New("machine secrets are incomplete"), err)
	}

	return b, nil
}

// SecretsFrom is a Talos secrets bundle in the talos provider's form (what its Secrets resource
// outputs).
func SecretsFrom(b *secrets.Bundle) Secrets {
	enc := base64.StdEncoding.EncodeToString
	ck := func(c *x509.PEMEncodedCertificateAndKey) CertAndKey {
		return CertAndKey{Cert: enc(c.Crt), Key: enc(c.Key)}
	}

	return Secrets{
		ClusterID: b.Cluster.ID, ClusterSecret: b.Cluster.Secret,
		BootstrapToken: b.Secrets.BootstrapToken, SecretboxEncryptionSecret: b.Secrets.SecretboxEncryptionSecret,
		AESCBCEncryptionSecret: b.Secrets.AESCBCEncryptionSecret, TrustdToken: b.TrustdInfo.Token,
		Certs: map[string]CertAndKey{
			"etcd": ck(b.Certs.Etcd), "k8s": ck(b.Certs.K8s), "k8sAggregator": ck(b.Certs.K8sAggregator), "os": ck(b.Certs.OS),
		},
		ServiceAccountKey: enc(b.Certs.K8sServiceAccount.Key),
	}
}
