package wire

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
)

// Secrets is the cluster's PKI as registered, with the source its configurations are generated
// from (the secrets in the generator's form and the contract they keep), derived once.
type Secrets struct {
	Resource *machine.Secrets
	own      configSource
}

// MachineSecrets registers the cluster's PKI (the talos provider generates and keeps it). The
// configurations applied are made from it; a running cluster's are checked with it before any
// new VM (CheckConfigs).
func MachineSecrets(s Scope) (*Secrets, error) {
	res, err := machine.NewSecrets(s.Ctx, s.child("secrets"), &machine.SecretsArgs{
		TalosVersion: pulumi.String(s.Cluster.ConfigContract),
	}, s.parent(),
		pulumi.AdditionalSecretOutputs([]string{"machineSecrets", "clientConfiguration"}),
		// The secrets are the cluster's PKI: regenerating them (the upstream resource would on
		// a talosVersion change) breaks every node. They are created once and kept.
		pulumi.IgnoreChanges([]string{"talosVersion"}),
	)
	if err != nil {
		return nil, errorf("registering the machine secrets: %w", err)
	}

	return &Secrets{
		Resource: res,
		own: configSource{
			secrets: res.MachineSecrets.ApplyT(func(m machine.MachineSecrets) machineconfig.Secrets {
				return secretsOf(m)
			}).(pulumi.AnyOutput),
			contract: res.TalosVersion,
		},
	}, nil
}

// configSource is what a node's configuration is generated from: secrets (resolving to
// machineconfig.Secrets) and the configuration contract.
type configSource struct {
	secrets  pulumi.AnyOutput
	contract pulumi.StringOutput
}

// placeholderSecrets is the source of a cluster whose secrets do not exist yet: placeholder
// secrets (machineconfig.Placeholder) and the contract the secrets will be created with.
func placeholderSecrets(contract string) configSource {
	return configSource{
		secrets: pulumi.All().ApplyT(func([]any) (machineconfig.Secrets, error) {
			return machineconfig.Placeholder(contract)
		}).(pulumi.AnyOutput),
		contract: pulumi.String(contract).ToStringOutput(),
	}
}

// secretsOf is the talos provider's machine secrets in the generator's form.
func secretsOf(m machine.MachineSecrets) machineconfig.Secrets {
	ck := func(c machine.Certificate) machineconfig.CertAndKey {
		return machineconfig.CertAndKey{Cert: c.Cert, Key: c.Key}
	}

	aescbc := ""
	if m.Secrets.AescbcEncryptionSecret != nil {
		aescbc = *m.Secrets.AescbcEncryptionSecret
	}

	return machineconfig.Secrets{
		ClusterID: m.Cluster.Id, ClusterSecret: m.Cluster.Secret,
		BootstrapToken: m.Secrets.BootstrapToken, SecretboxEncryptionSecret: m.Secrets.SecretboxEncryptionSecret,
		AESCBCEncryptionSecret: aescbc, TrustdToken: m.Trustdinfo.Token,
		Certs: map[string]machineconfig.CertAndKey{
			"etcd": ck(m.Certs.Etcd), "k8s": ck(m.Certs.K8s), "k8sAggregator": ck(m.Certs.K8sAggregator), "os": ck(m.Certs.Os),
		},
		ServiceAccountKey: m.Certs.K8sServiceaccount.Key,
	}
}
