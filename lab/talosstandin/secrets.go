package talosstandin

import (
	"encoding/base64"
	"fmt"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/role"
)

// contract is the version contract of talosVersion ("v1.11", "v1.11.3"), the machinery's current
// one when empty.
func contract(talosVersion string) (*config.VersionContract, error) {
	if talosVersion == "" {
		return config.TalosVersionCurrent, nil
	}

	vc, err := config.ParseContractFromVersion(talosVersion)
	if err != nil {
		return nil, fmt.Errorf("talosVersion %q: %w", talosVersion, err)
	}

	return vc, nil
}

// newSecrets generates a machine secrets bundle for a Talos version contract, as
// talos_machine_secrets does.
func newSecrets(talosVersion string) (*secrets.Bundle, error) {
	vc, err := contract(talosVersion)
	if err != nil {
		return nil, err
	}

	return secrets.NewBundle(secrets.NewFixedClock(time.Now()), vc)
}

func b64(b []byte) property.Value { return property.New(base64.StdEncoding.EncodeToString(b)) }

func certKey(c *x509.PEMEncodedCertificateAndKey) property.Value {
	if c == nil || c.Crt == nil {
		return property.New(property.Map{})
	}

	return property.New(property.NewMap(map[string]property.Value{"cert": b64(c.Crt), "key": b64(c.Key)}))
}

// machineSecretsValue is the schema's MachineSecrets object: PEM material base64-encoded, as the
// upstream provider stores it.
func machineSecretsValue(b *secrets.Bundle) property.Value {
	sec := map[string]property.Value{
		"bootstrapToken":            property.New(b.Secrets.BootstrapToken),
		"secretboxEncryptionSecret": property.New(b.Secrets.SecretboxEncryptionSecret),
	}
	if b.Secrets.AESCBCEncryptionSecret != "" {
		sec["aescbcEncryptionSecret"] = property.New(b.Secrets.AESCBCEncryptionSecret)
	}

	return property.New(property.NewMap(map[string]property.Value{
		"cluster": property.New(property.NewMap(map[string]property.Value{
			"id": property.New(b.Cluster.ID), "secret": property.New(b.Cluster.Secret),
		})),
		"secrets":    property.New(property.NewMap(sec)),
		"trustdinfo": property.New(property.NewMap(map[string]property.Value{"token": property.New(b.TrustdInfo.Token)})),
		"certs": property.New(property.NewMap(map[string]property.Value{
			"etcd":              certKey(b.Certs.Etcd),
			"k8s":               certKey(b.Certs.K8s),
			"k8sAggregator":     certKey(b.Certs.K8sAggregator),
			"k8sServiceaccount": property.New(property.NewMap(map[string]property.Value{"key": b64(b.Certs.K8sServiceAccount.Key)})),
			"os":                certKey(b.Certs.OS),
		})),
	})).WithSecret(true)
}

// clientConfigurationValue is the schema's ClientConfiguration: the OS CA and an admin client
// certificate for the Talos API.
func clientConfigurationValue(b *secrets.Bundle) (property.Value, error) {
	if b.Clock == nil {
		b.Clock = secrets.NewFixedClock(time.Now())
	}

	crt, err := b.GenerateTalosAPIClientCertificateWithTTL(role.MakeSet(role.Admin), constants.TalosAPIDefaultCertificateValidityDuration)
	if err != nil {
		return property.Value{}, fmt.Errorf("generating the admin client certificate: %w", err)
	}

	return property.New(property.NewMap(map[string]property.Value{
		"caCertificate":     b64(b.Certs.OS.Crt),
		"clientCertificate": b64(crt.Crt),
		"clientKey":         b64(crt.Key),
	})).WithSecret(true), nil
}

// bundleFromValue rebuilds a secrets bundle from the schema's MachineSecrets object and checks it
// for contract vc: since machinery v1.14 which secrets a bundle needs depends on the version
// contract (a contract without Kubernetes or etcd needs none of their certificates).
func bundleFromValue(v property.Value, vc *config.VersionContract) (*secrets.Bundle, error) {
	if !v.IsMap() {
		return nil, fmt.Errorf("machineSecrets: expected an object")
	}

	m := v.AsMap()
	dec := func(path ...string) ([]byte, error) {
		s := str(m, path...)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("machineSecrets.%v: not base64: %w", path, err)
		}

		return b, nil
	}

	pair := func(name string) (*x509.PEMEncodedCertificateAndKey, error) {
		crt, err := dec("certs", name, "cert")
		if err != nil {
			return nil, err
		}

		key, err := dec("certs", name, "key")
		if err != nil {
			return nil, err
		}

		return &x509.PEMEncodedCertificateAndKey{Crt: crt, Key: key}, nil
	}

	b := &secrets.Bundle{
		Clock:      secrets.NewFixedClock(time.Now()),
		Cluster:    &secrets.Cluster{ID: str(m, "cluster", "id"), Secret: str(m, "cluster", "secret")},
		TrustdInfo: &secrets.TrustdInfo{Token: str(m, "trustdinfo", "token")},
		Secrets: &secrets.Secrets{
			BootstrapToken:            str(m, "secrets", "bootstrapToken"),
			SecretboxEncryptionSecret: str(m, "secrets", "secretboxEncryptionSecret"),
			AESCBCEncryptionSecret:    str(m, "secrets", "aescbcEncryptionSecret"),
		},
		Certs: &secrets.Certs{},
	}

	var err error
	if b.Certs.Etcd, err = pair("etcd"); err != nil {
		return nil, err
	}

	if b.Certs.K8s, err = pair("k8s"); err != nil {
		return nil, err
	}

	if b.Certs.K8sAggregator, err = pair("k8sAggregator"); err != nil {
		return nil, err
	}

	if b.Certs.OS, err = pair("os"); err != nil {
		return nil, err
	}

	sa, err := dec("certs", "k8sServiceaccount", "key")
	if err != nil {
		return nil, err
	}

	b.Certs.K8sServiceAccount = &x509.PEMEncodedKey{Key: sa}

	return b, b.Validate(vc)
}

// str reads a nested string, "" when absent.
func str(m property.Map, path ...string) string {
	v := property.New(m)
	for _, k := range path {
		if !v.IsMap() {
			return ""
		}

		v = v.AsMap().Get(k)
	}

	if v.IsString() {
		return v.AsString()
	}

	return ""
}
