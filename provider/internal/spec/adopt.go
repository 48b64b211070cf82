package spec

import (
	"errors"
	"strings"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretsbundle"
)

// SecretsInput is the cluster's existing Talos secrets: Bundle is secrets.bundle (a secret; not
// known yet at a preview where it comes from another resource).
type SecretsInput struct {
	Bundle Patch
}

// Secrets are the cluster's existing Talos secrets, read from secrets.bundle: the component
// configures its nodes with them instead of generating new ones, and adopts the running cluster
// they belong to. Known is false while the bundle is not known (a preview where it comes from
// another resource); then Parsed is empty and nothing is checked yet.
type Secrets struct {
	Known  bool
	Parsed machineconfig.Secrets
}

func buildSecrets(p *problems, in Input, c *Cluster) {
	if in.Secrets == nil {
		return
	}

	b := in.Secrets.Bundle
	if b.Known && strings.TrimSpace(b.Text) == "" {
		p.errorf(secretsbundle.Field, "is empty; give the cluster's secrets bundle (`talosctl gen secrets` YAML, or the "+
			"machine secrets JSON of the Terraform or Pulumi talos provider), or remove secrets to generate new ones")

		return
	}

	c.Secrets = &Secrets{Known: b.Known}
	if !b.Known {
		return
	}

	parsed, err := secretsbundle.Parse(b.Text)

	var bad *secretsbundle.Error

	switch {
	case errors.As(err, &bad):
		for _, problem := range bad.Problems {
			p.errorf(secretsbundle.Field, "%s", problem)
		}
	case err != nil:
		p.errorf(secretsbundle.Field, "%s", strings.TrimPrefix(err.Error(), secretsbundle.Field+": "))
	default:
		c.Secrets.Parsed = parsed
	}
}
