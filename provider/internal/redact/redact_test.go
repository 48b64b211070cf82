package redact_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/machineconfig"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/redact"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretstest"
)

func bundle() machineconfig.Secrets { return machineconfig.SecretsFrom(secretstest.Bundle()) }

// secretPatch carries secrets a user may add: registry credentials, a proxy URL with a password,
// an extra manifest header, an inline manifest with a Secret beside a ConfigMap.
const secretPatch = `machine:
  registries:
    config:
      registry.example.com:
        auth:
          username: robot
          password: hunter2-registry-password
  env:
    https_proxy: http://proxyuser:proxy-password-42@proxy.example.com:3128
cluster:
  extraManifestHeaders:
    Authorization: Bearer manifest-header-token-123
  inlineManifests:
    - name: app
      contents: |
        apiVersion: v1
        kind: Secret
        metadata:
          name: db
        stringData:
          password: inline-db-password-987
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: settings
        data:
          mode: fast
`

func generate(t *testing.T, contract string, s machineconfig.Secrets, patches ...string) string {
	t.Helper()

	r := machineconfig.Request{
		ClusterName: "lab", Endpoint: "https://10.0.0.10:6443", KubernetesVersion: "v1.34.1",
		Contract: contract, ControlPlane: true, Secrets: s,
	}
	for i, p := range patches {
		r.Patches = append(r.Patches, machineconfig.Patch{From: "patch" + string(rune('0'+i)), Text: p})
	}

	out, err := machineconfig.Generate(r)
	if err != nil {
		t.Fatal(err)
	}

	return out
}

// secretValues are every secret of the bundle and of secretPatch, in the forms they could leak in.
func secretValues(s machineconfig.Secrets) []string {
	raw := []string{
		s.ClusterSecret, s.BootstrapToken, s.SecretboxEncryptionSecret, s.AESCBCEncryptionSecret, s.TrustdToken,
		s.ServiceAccountKey, "hunter2-registry-password", "proxy-password-42", "manifest-header-token-123", "inline-db-password-987",
	}
	for _, ck := range s.Certs {
		raw = append(raw, ck.Key, ck.Cert)
	}

	var out []string

	for _, v := range raw {
		if v == "" {
			continue
		}

		out = append(out, v)

		if b, err := base64.StdEncoding.DecodeString(v); err == nil {
			for line := range strings.Lines(string(b)) {
				if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
					out = append(out, line)
				}
			}
		}
	}

	return out
}

func TestConfigHidesEverySecretAndShowsTheRest(t *testing.T) {
	t.Parallel()

	for _, contract := range []string{"v1.10", "v1.12", "v1.14"} {
		out, err := redact.Config(generate(t, contract, bundle(), secretPatch))
		if err != nil {
			t.Fatalf("%s: %v", contract, err)
		}

		for _, v := range secretValues(bundle()) {
			if strings.Contains(out, v) {
				t.Errorf("%s: the redacted configuration holds a secret (%.12s…)", contract, v)
			}
		}

		for _, want := range []string{
			"https://10.0.0.10:6443", "registry.example.com", "username: robot", "proxyuser:" + redact.Fingerprint("proxy-password-42"),
			"name: settings", "mode: fast", "password: " + redact.Fingerprint("inline-db-password-987"),
			"key: " + redact.Fingerprint(bundle().Certs["os"].Key), "crt: " + redact.Fingerprint(bundle().Certs["os"].Cert),
			"token: " + redact.Fingerprint(bundle().TrustdToken),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the redacted configuration does not show %q:\n%s", contract, want, out)
			}
		}
	}
}

func TestConfigIsStableAndARotatedSecretChangesOnlyItsFingerprint(t *testing.T) {
	t.Parallel()

	a, err := redact.Config(generate(t, "v1.12", bundle()))
	if err != nil {
		t.Fatal(err)
	}

	b, _ := redact.Config(generate(t, "v1.12", bundle()))
	if a != b {
		t.Fatal("two renderings of one configuration differ")
	}

	rotated := bundle()
	rotated.TrustdToken = "abcdef.0123456789abcdef"

	c, err := redact.Config(generate(t, "v1.12", rotated))
	if err != nil {
		t.Fatal(err)
	}

	diff, err := redact.Diff(a, c)
	if err != nil {
		t.Fatal(err)
	}

	want := "-    token: " + redact.Fingerprint(bundle().TrustdToken) + "\n+    token: " + redact.Fingerprint(rotated.TrustdToken)
	if !strings.Contains(diff, want) || strings.Count(diff, "\n-") != 1 {
		t.Fatalf("the diff of a rotated token:\n%s", diff)
	}

	changes, err := redact.Changes(a, c)
	if err != nil {
		t.Fatal(err)
	}

	if got, want := redact.Summary(changes), "v1alpha1: .machine.token: "+redact.Fingerprint(bundle().TrustdToken)+" → "+redact.Fingerprint(rotated.TrustdToken); got != want {
		t.Errorf("the change of a rotated token: %q, want %q", got, want)
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()

	// printf %s hunter2 | sha256sum → f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7
	if got := redact.Fingerprint("hunter2"); got != "<redacted sha256:f52fbd32>" {
		t.Fatalf("Fingerprint = %s", got)
	}
}

func TestManifestsHideSecretData(t *testing.T) {
	t.Parallel()

	out, err := redact.Manifests("apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ndata: {token: c2VjcmV0LXRva2VuLXZhbHVlLTE=}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {token: visible}\n")
	if err != nil {
		t.Fatal(err)
	}

	if strings.Contains(out, "c2VjcmV0LXRva2VuLXZhbHVlLTE=") || !strings.Contains(out, "token: visible") {
		t.Fatalf("redacted manifests:\n%s", out)
	}
}

func TestChangesNameTheDocumentAndPaths(t *testing.T) {
	t.Parallel()

	render := func(contract, patch string) string {
		out, err := redact.Config(generate(t, contract, bundle(), patch))
		if err != nil {
			t.Fatal(err)
		}

		return out
	}

	for _, c := range []struct{ contract, before, after, want string }{
		{
			"v1.10", "machine: {network: {nameservers: [1.1.1.1]}}", "machine: {network: {nameservers: [9.9.9.9]}}",
			"v1alpha1: .machine.network.nameservers: [1.1.1.1] → [9.9.9.9]",
		},
		{
			"v1.12", "apiVersion: v1alpha1\nkind: ResolverConfig\nnameservers: [{address: 1.1.1.1}]\n",
			"apiVersion: v1alpha1\nkind: ResolverConfig\nnameservers: [{address: 9.9.9.9}]\n",
			"ResolverConfig: .nameservers: [{address: 1.1.1.1}] → [{address: 9.9.9.9}]",
		},
		{
			"v1.12", "machine: {install: {image: factory.talos.dev/installer/aaaa:v1.12.0}}",
			"machine: {install: {image: factory.talos.dev/installer/bbbb:v1.12.0}}\n---\napiVersion: v1alpha1\nkind: HostnameConfig\nauto: \"off\"\nhostname: cp-1\n",
			"v1alpha1: .machine.install.image: factory.talos.dev/installer/aaaa:v1.12.0 → factory.talos.dev/installer/bbbb:v1.12.0; " +
				"HostnameConfig: .auto: stable → 'off', .hostname: (none) → cp-1",
		},
	} {
		changes, err := redact.Changes(render(c.contract, c.before), render(c.contract, c.after))
		if err != nil {
			t.Fatal(err)
		}

		if got := redact.Summary(changes); got != c.want {
			t.Errorf("%s: changes %q, want %q", c.contract, got, c.want)
		}
	}
}
