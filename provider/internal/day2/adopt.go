package day2

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
)

// ErrForeignCA is a node whose Talos API does not trust, or is not trusted by, the CA of the
// secrets it was reached with: the secrets are another cluster's.
var ErrForeignCA = errors.New("the node's Talos API CA is not the secrets bundle's")

// Running is what a running node of a cluster being adopted reports through its Talos API: the
// Talos version it runs, the version of its kube-apiserver image ("" on a worker) and the
// configuration it runs (machinery's encoding without comments).
type Running struct{ Version, KubernetesVersion, Config string }

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
