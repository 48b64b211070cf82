package day2

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
)

// ErrForeignCA is a node whose Talos API does not trust, or is not trusted by, the CA of the
// secrets it was reached with: the secrets are another cluster's.
var ErrForeignCA = errors.New("the node's Talos API CA is not the secrets bundle's")

// Running is what a running node of a cluster being adopted reports through its Talos API: the
// Talos version and Image Factory schematic it runs, the version of its kube-apiserver image (""
// on a worker) and the configuration it runs (machinery's encoding without comments).
type Running struct {
	Version, Schematic, KubernetesVersion, Config string
	// Security says how the node was installed: Secure Boot on, and the key kinds of its STATE and
	// EPHEMERAL volumes ("tpm", "nodeid"; "" unencrypted). Known is false when the node does not
	// report them.
	Security Security
}

// Security is a node's Secure Boot state and its system volumes' keys, as it reports them.
type Security struct {
	Known               bool
	SecureBoot          bool
	StateKey, Ephemeral string
}

// ReadRunning reads what node n runs, reached with a talosconfig issued from the secrets of the
// cluster to adopt. A TLS failure either way (the node's certificate is not signed by the
// secrets' CA, or the node refuses a client certificate that CA issued) is ErrForeignCA.
func ReadRunning(ctx context.Context, a Access, n Node) (Running, error) {
	c, err := a.Talos(ctx, n.Address)
	if err != nil {
		return Running{}, err
	}
	defer c.Close() //nolint:errcheck

	ver, err := c.Version(ctx)
	if err != nil {
		if foreignCA(err) {
			return Running{}, fmt.Errorf("%w (%s at %s: %v)", ErrForeignCA, n.Name, n.Address, err)
		}

		return Running{}, fmt.Errorf("reading the Talos version of %s at %s: %w", n.Name, n.Address, err)
	}

	var r Running
	for _, m := range ver.GetMessages() {
		r.Version = m.GetVersion().GetTag()
	}

	if r.Config, err = runningConfig(ctx, c, n); err != nil {
		return Running{}, err
	}

	if r.Schematic, err = schematicOf(ctx, c); err != nil {
		return Running{}, err
	}

	if r.Security, err = securityOf(ctx, c); err != nil {
		return Running{}, fmt.Errorf("reading how %s was installed: %w", n.Name, err)
	}

	cfg, err := configloader.NewFromBytes([]byte(r.Config))
	if err != nil {
		return Running{}, fmt.Errorf("reading the configuration %s runs: %w", n.Name, err)
	}

	if cfg.Machine() != nil && cfg.Machine().Type().IsControlPlane() && cfg.K8sAPIServerConfig() != nil {
		if _, tag, ok := strings.Cut(imageTag(cfg.K8sAPIServerConfig().Image()), ":"); ok {
			r.KubernetesVersion = tag
		}
	}

	return r, nil
}

// imageTag is an image reference without its digest ("registry.k8s.io/kube-apiserver:v1.34.1").
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")

	if i := strings.LastIndex(ref, "/"); i >= 0 {
		return ref[i+1:]
	}

	return ref
}

// foreignCA tells a TLS failure about certificates from any other failure (a node that is down
// is not a foreign one).
func foreignCA(err error) bool {
	s := err.Error()

	return strings.Contains(s, "certificate signed by unknown authority") || strings.Contains(s, "unknown certificate authority") ||
		strings.Contains(s, "bad certificate") || strings.Contains(s, "failed to verify certificate")
}

// SecretsMismatch names the fields of the secrets bundle s that the running configuration
// config contradicts: the Kubernetes, aggregator and etcd CAs (control planes hold all three,
// workers the Kubernetes CA) and the bootstrap token. A bundle whose Talos API CA matches (the
// TLS check) but whose Kubernetes CA was rotated since (`talosctl rotate-ca`) would push the old
// CA to every node.
func SecretsMismatch(config string, s machineconfig.Secrets) ([]string, error) {
	cfg, err := configloader.NewFromBytes([]byte(config))
	if err != nil {
		return nil, fmt.Errorf("reading the running configuration: %w", err)
	}

	same := func(bundle string, running []byte) bool {
		b, err := base64.StdEncoding.DecodeString(bundle)
		return err == nil && bytes.Equal(bytes.TrimSpace(b), bytes.TrimSpace(running))
	}

	var differ []string

	check := func(field string, bundle string, running *x509.PEMEncodedCertificateAndKey) {
		if running != nil && len(running.Crt) > 0 && !same(bundle, running.Crt) {
			differ = append(differ, field)
		}
	}

	if ca := cfg.K8sAPIServerCAConfig(); ca != nil {
		if accepted := ca.AcceptedCAs(); len(accepted) > 0 && !same(s.Certs["k8s"].Cert, accepted[0].Crt) {
			differ = append(differ, "certs.k8s")
		}
	}

	if ca := cfg.K8sAggregatorCAConfig(); ca != nil {
		check("certs.k8saggregator", s.Certs["k8sAggregator"].Cert, ca.IssuingCA())
	}

	if cl := cfg.Cluster(); cl != nil {
		if cl.Etcd() != nil {
			check("certs.etcd", s.Certs["etcd"].Cert, cl.Etcd().CA())
		}

		if t := cl.Token(); t != nil && t.ID() != "" && t.ID()+"."+t.Secret() != s.BootstrapToken {
			differ = append(differ, "secrets.bootstraptoken")
		}
	}

	return differ, nil
}
