package secretsbundle

import (
	"crypto/ed25519"
	"crypto/rand"
	stdx509 "crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretstest"
)

// testBundle is a real bundle, as talosctl gen secrets makes it.
var testBundle = secretstest.Bundle

// aescbcBundle is testBundle as an older cluster has it: AES-CBC instead of secretbox.
var aescbcBundle = sync.OnceValue(func() *secrets.Bundle {
	b := *testBundle()
	s := *b.Secrets
	s.AESCBCEncryptionSecret, s.SecretboxEncryptionSecret = s.SecretboxEncryptionSecret, ""
	b.Secrets = &s

	return &b
})

// talosctlText is the bundle as talosctl gen secrets writes it (machinery's own encoding).
func talosctlText(t *testing.T, b *secrets.Bundle) string {
	t.Helper()

	out, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}

	return string(out)
}

// providerTree is the machine secrets object of the Terraform (snake_case) or Pulumi
// (camelCase) talos provider, built from the generator's form. Terraform has a null AES-CBC
// secret when there is none; Pulumi leaves it out.
func providerTree(s machineconfig.Secrets, shape Shape) map[string]any {
	n := shapeNames[shape]
	ck := func(name string) map[string]any {
		return map[string]any{"cert": s.Certs[name].Cert, "key": s.Certs[name].Key}
	}

	sec := map[string]any{n.bootstrap: s.BootstrapToken}
	for k, v := range map[string]string{n.secretbox: s.SecretboxEncryptionSecret, n.aescbc: s.AESCBCEncryptionSecret} {
		switch {
		case v != "":
			sec[k] = v
		case shape == Terraform:
			sec[k] = nil
		}
	}

	return map[string]any{
		"cluster":    map[string]any{"id": s.ClusterID, "secret": s.ClusterSecret},
		"secrets":    sec,
		"trustdinfo": map[string]any{"token": s.TrustdToken},
		"certs": map[string]any{
			"etcd": ck("etcd"), "k8s": ck("k8s"), n.aggregator: ck("k8sAggregator"), "os": ck("os"),
			n.serviceAccount: map[string]any{"key": s.ServiceAccountKey},
		},
	}
}

// tree is the bundle in shape as a tree, for the bad-input cases to change.
func tree(t *testing.T, b *secrets.Bundle, shape Shape) map[string]any {
	t.Helper()

	if shape != Talosctl {
		return providerTree(machineconfig.SecretsFrom(b), shape)
	}

	var m map[string]any
	if err := yaml.Unmarshal([]byte(talosctlText(t, b)), &m); err != nil {
		t.Fatal(err)
	}

	return m
}

// text is the tree written the way the shape comes: YAML for talosctl, JSON for the providers.
func text(t *testing.T, m map[string]any, shape Shape) string {
	t.Helper()

	var (
		out []byte
		err error
	)

	if shape == Talosctl {
		out, err = yaml.Marshal(m)
	} else {
		out, err = json.MarshalIndent(m, "", "\t")
	}

	if err != nil {
		t.Fatal(err)
	}

	return string(out)
}

func TestEveryShapeReadsBackTheBundle(t *testing.T) {
	t.Parallel()

	for _, b := range []*secrets.Bundle{testBundle(), aescbcBundle()} {
		want := machineconfig.SecretsFrom(b)

		for _, shape := range []Shape{Talosctl, Terraform, Pulumi} {
			in := talosctlText(t, b)
			if shape != Talosctl {
				in = text(t, providerTree(want, shape), shape)
			}

			got, gotShape, err := ParseShape(in)
			if err != nil {
				t.Fatalf("%s: %v", shape, err)
			}

			if gotShape != shape {
				t.Errorf("read as %s, want %s", gotShape, shape)
			}

			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: the secrets read differ from the bundle's", shape)
			}
		}
	}

	// The talosctl YAML quoted as a JSON string (Pulumi YAML's fn::toJSON of a text) is read too.
	quoted, err := json.Marshal(talosctlText(t, testBundle()))
	if err != nil {
		t.Fatal(err)
	}

	if got, shape, err := ParseShape(string(quoted)); err != nil || shape != Talosctl || !reflect.DeepEqual(got, machineconfig.SecretsFrom(testBundle())) {
		t.Errorf("the talosctl YAML as a JSON string: %v, read as %s", err, shape)
	}

	// Pulumi's output as YAML (e.g. `pulumi stack output -j | yq -P`) is read too.
	in := providerTree(machineconfig.SecretsFrom(testBundle()), Pulumi)
	if _, shape, err := ParseShape(text(t, in, Talosctl)); err != nil || shape != Pulumi {
		t.Errorf("Pulumi's form as YAML: %v, read as %s", err, shape)
	}
}

func TestParsedSecretsMakeAValidConfiguration(t *testing.T) {
	t.Parallel()

	for _, shape := range []Shape{Talosctl, Terraform, Pulumi} {
		in := talosctlText(t, testBundle())
		if shape != Talosctl {
			in = text(t, tree(t, testBundle(), shape), shape)
		}

		s, err := Parse(in)
		if err != nil {
			t.Fatalf("%s: %v", shape, err)
		}

		for _, cp := range []bool{true, false} {
			// Generate validates the configuration with Talos.
			out, err := machineconfig.Generate(machineconfig.Request{
				ClusterName: "adopted", Endpoint: "https://10.0.0.10:6443", KubernetesVersion: "v1.34.1",
				Contract: "v1.11", ControlPlane: cp, Secrets: s,
			})
			if err != nil {
				t.Fatalf("%s: %v", shape, err)
			}

			cfg, err := configloader.NewFromBytes([]byte(out))
			if err != nil {
				t.Fatal(err)
			}

			if got := cfg.DiscoveryIdentityConfig().ClusterID(); got != testBundle().Cluster.ID {
				t.Errorf("%s: the configuration has another cluster id", shape)
			}

			if cp && string(cfg.Cluster().Etcd().CA().Crt) != string(testBundle().Certs.Etcd.Crt) {
				t.Errorf("%s: the configuration has another etcd CA", shape)
			}
		}
	}
}

// set sets (or with del, deletes) the value at a dotted path of a tree.
func set(m map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		m = m[k].(map[string]any)
	}

	if v == del {
		delete(m, keys[len(keys)-1])
	} else {
		m[keys[len(keys)-1]] = v
	}
}

var del = &struct{}{}

func get(m map[string]any, path string) string {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		m = m[k].(map[string]any)
	}

	return m[keys[len(keys)-1]].(string)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

type badCase struct {
	name  string
	shape Shape
	edit  func(m map[string]any)
	want  []string
}

var badCases = []badCase{
	{"os key missing", Talosctl, func(m map[string]any) { set(m, "certs.os.key", del) },
		[]string{"secrets.bundle: certs.os.key is missing"}},
	{"k8s crt not base64", Talosctl, func(m map[string]any) { set(m, "certs.k8s.crt", "Zm9v!bmFy%YmF6") },
		[]string{"secrets.bundle: certs.k8s.crt is not a base64 PEM certificate"}},
	{"k8s cert not PEM", Terraform, func(m map[string]any) { set(m, "certs.k8s.cert", b64("q3Zx9tTk1vWm8pLr")) },
		[]string{"secrets.bundle: certs.k8s.cert is not a base64 PEM certificate"}},
	{"key of another CA", Terraform, func(m map[string]any) { set(m, "certs.etcd.key", get(m, "certs.k8s.key")) },
		[]string{"certs.etcd.key does not match certs.etcd.cert"}},
	{"aggregator key not PEM", Pulumi, func(m map[string]any) { set(m, "certs.k8sAggregator.key", b64("zq8ffw0rd-secret-value")) },
		[]string{"certs.k8sAggregator.key is not a base64 PEM private key"}},
	{"leaf certificate", Pulumi, func(m map[string]any) {
		set(m, "certs.os.cert", b64(string(leaf.crt)))
		set(m, "certs.os.key", b64(string(leaf.key)))
	}, []string{"certs.os.cert is not a CA certificate"}},
	{"service account key not PEM", Terraform, func(m map[string]any) { set(m, "certs.k8s_serviceaccount.key", "c2VjcmV0LWtleS1ieXRlcw==") },
		[]string{"certs.k8s_serviceaccount.key is not a base64 PEM private key"}},
	{"bootstrap token", Pulumi, func(m map[string]any) { set(m, "secrets.bootstrapToken", "Q7xk2p.9vtr4mzq8wn3hd6s") },
		[]string{"secrets.bootstrapToken is not a Kubernetes bootstrap token"}},
	{"bootstrap token form", Talosctl, func(m map[string]any) { set(m, "secrets.bootstraptoken", "q7xk2p9vtr4mzq8wn3hd6sa") },
		[]string{"secrets.bootstraptoken is not a Kubernetes bootstrap token"}},
	{"secretbox of 16 bytes", Terraform, func(m map[string]any) { set(m, "secrets.secretbox_encryption_secret", b64("k3y-0f-16-bytes!")) },
		[]string{"secrets.secretbox_encryption_secret is not base64 of 32 bytes"}},
	{"aescbc not base64", Pulumi, func(m map[string]any) {
		set(m, "secrets.secretboxEncryptionSecret", del)
		set(m, "secrets.aescbcEncryptionSecret", "n0t_base64_aescbc_secret_value")
	}, []string{"secrets.aescbcEncryptionSecret is not base64 of 32 bytes"}},
	{"no encryption secret", Talosctl, func(m map[string]any) { set(m, "secrets.secretboxencryptionsecret", del) },
		[]string{"one of secrets.secretboxencryptionsecret and secrets.aescbcencryptionsecret is required"}},
	{"both encryption secrets", Terraform, func(m map[string]any) {
		set(m, "secrets.aescbc_encryption_secret", get(m, "secrets.secretbox_encryption_secret"))
	}, []string{"are both set"}},
	{"no cluster", Terraform, func(m map[string]any) { set(m, "cluster", del) }, []string{"secrets.bundle: cluster is missing"}},
	{"null cluster secret", Terraform, func(m map[string]any) { set(m, "cluster.secret", nil) }, []string{"cluster.secret is missing"}},
	{"empty trustd token", Talosctl, func(m map[string]any) { set(m, "trustdinfo.token", "") }, []string{"trustdinfo.token is empty"}},
	{"id not a string", Pulumi, func(m map[string]any) { set(m, "cluster.id", 424242) }, []string{"cluster.id is not a string"}},
	{"redacted key", Talosctl, func(m map[string]any) { set(m, "certs.etcd.key", "******") }, []string{"certs.etcd.key is redacted"}},
	{"certs not a mapping", Terraform, func(m map[string]any) { set(m, "certs", "x7Kq9vLm2nPz") },
		[]string{"secrets.bundle: certs is not a mapping"}},
	{"no etcd", Talosctl, func(m map[string]any) { set(m, "certs.etcd", del) }, []string{"certs.etcd is missing"}},
}

func TestBadBundles(t *testing.T) {
	t.Parallel()

	for _, c := range badCases {
		m := tree(t, testBundle(), c.shape)
		c.edit(m)
		in := text(t, m, c.shape)

		_, shape, err := ParseShape(in)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}

		msg := err.Error()
		for _, w := range append(c.want, "read as "+c.shape.String()) {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", c.name, msg, w)
			}
		}

		if shape != c.shape || strings.Count(msg, "\n") != len(c.want) {
			t.Errorf("%s: read as %s, want %s; want only %q, got:\n%s", c.name, shape, c.shape, c.want, msg)
		}

		assertNoValue(t, c.name, msg, m)
	}
}

func TestEveryProblemAtOnce(t *testing.T) {
	t.Parallel()

	for _, shape := range []Shape{Talosctl, Terraform, Pulumi} {
		m := tree(t, testBundle(), shape)

		var want []string

		for _, c := range badCases {
			// One case per field: the ones that change the same field, or remove a parent, are
			// left out.
			switch c.name {
			case "k8s crt not base64", "bootstrap token form", "aescbc not base64", "no encryption secret",
				"both encryption secrets", "no cluster", "certs not a mapping", "no etcd", "key of another CA":
				continue
			}

			if c.shape == shape {
				c.edit(m)
				want = append(want, c.want...)
			}
		}

		_, err := Parse(text(t, m, shape))
		if err == nil {
			t.Fatalf("%s: accepted", shape)
		}

		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", shape, err, w)
			}
		}

		if got := strings.Count(err.Error(), "\n"); got != len(want) || len(want) < 3 {
			t.Errorf("%s: want %d problems, got:\n%s", shape, len(want), err)
		}

		assertNoValue(t, shape.String(), err.Error(), m)
	}
}

func TestTextThatIsNoBundle(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{
		"":                           "secrets.bundle: is empty",
		"  \n":                       "secrets.bundle: is empty",
		"cluster: [s3cr3t-v4lue\n":   "secrets.bundle: is not valid YAML",
		"{\"cluster\": s3cr3t-v4lue": "secrets.bundle: is not valid JSON (at byte",
		"- s3cr3t-v4lue\n":           "secrets.bundle: is not a mapping",
		"s3cr3t-v4lue":               "secrets.bundle: is not a mapping",
	} {
		_, err := Parse(in)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: the error quotes the text: %v", in, err)
		}
	}
}

// assertNoValue fails when msg holds any value of the bundle, or a line of a PEM block in it.
func assertNoValue(t *testing.T, name, msg string, m map[string]any) {
	t.Helper()

	var walk func(v any)

	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case string:
			if len(v) >= 6 && strings.Contains(msg, v) {
				t.Errorf("%s: the error holds a value of the bundle", name)
			}

			raw, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return
			}

			for _, line := range strings.Split(string(raw), "\n") {
				if len(line) >= 8 && !strings.HasPrefix(line, "-----") && strings.Contains(msg, line) {
					t.Errorf("%s: the error holds a line of a PEM block of the bundle", name)
				}
			}
		}
	}

	walk(m)
}

// leaf is a self-signed certificate that is no CA, and its key (PEM).
var leaf = func() (p certPair) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}

	tmpl := &stdx509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Unix(1_700_000_000, 0), NotAfter: time.Unix(2_000_000_000, 0),
	}

	der, err := stdx509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		panic(err)
	}

	key, err := stdx509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		panic(err)
	}

	p.crt = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	p.key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})

	return p
}()
