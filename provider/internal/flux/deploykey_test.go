package flux

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func genKey(t *testing.T) (privatePEM, publicAuthorized string) {
	t.Helper()

	privatePEM, publicAuthorized, err := GenerateDeployKey()
	if err != nil {
		t.Fatal(err)
	}

	return privatePEM, publicAuthorized
}

// knownHostsLine is the known_hosts line of a fresh host key for host:port, and the key.
func knownHostsLine(t *testing.T, host string, port int) string {
	t.Helper()

	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}

	return knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(host, strconv.Itoa(port)))}, k) + "\n"
}

func TestGenerateDeployKey(t *testing.T) {
	priv, pub := genKey(t)

	block, rest := pem.Decode([]byte(priv))
	if block == nil || block.Type != "OPENSSH PRIVATE KEY" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("private key is not one OpenSSH PEM block:\n%s", priv)
	}

	signer, err := ssh.ParsePrivateKey([]byte(priv))
	if err != nil {
		t.Fatal(err)
	}

	parsed, _, _, rest2, err := ssh.ParseAuthorizedKey([]byte(pub))
	if err != nil || len(rest2) != 0 || !strings.HasSuffix(pub, "\n") || strings.Count(pub, "\n") != 1 {
		t.Fatalf("public key %q is not one authorized_keys line: %v", pub, err)
	}

	if parsed.Type() != ssh.KeyAlgoED25519 || !bytes.Equal(parsed.Marshal(), signer.PublicKey().Marshal()) {
		t.Errorf("public key %s is not the private key's %s", ssh.FingerprintSHA256(parsed), ssh.FingerprintSHA256(signer.PublicKey()))
	}

	// The key signs, and the public half verifies it.
	sig, err := signer.Sign(rand.Reader, []byte("flux"))
	if err != nil {
		t.Fatal(err)
	}

	if err := parsed.Verify([]byte("flux"), sig); err != nil {
		t.Error(err)
	}

	if priv2, _ := genKey(t); priv2 == priv {
		t.Error("two calls gave the same key")
	}
}

func TestDeployKeySecret(t *testing.T) {
	priv, pub := genKey(t)
	hosts := knownHostsLine(t, "127.0.0.1", 40022) + knownHostsLine(t, "git.example.com", 22)

	s, err := DeployKeySecret(priv, strings.TrimSpace(pub), hosts)
	if err != nil {
		t.Fatal(err)
	}

	if !strings.HasPrefix(s, "---\napiVersion: v1\nkind: Secret\n") || strings.Contains(s, "creationTimestamp") {
		t.Errorf("Secret is not written as flux writes it:\n%s", s)
	}

	var secret corev1.Secret
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(s, "---\n")), &secret); err != nil {
		t.Fatal(err)
	}

	if secret.Name != Name || secret.Namespace != Namespace || len(secret.Data) != 0 || len(secret.StringData) != 3 || secret.Type != "" {
		t.Fatalf("Secret %s/%s, type %q, data %d, stringData keys %d", secret.Namespace, secret.Name, secret.Type, len(secret.Data), len(secret.StringData))
	}

	if secret.StringData[IdentityKey] != priv {
		t.Error("identity is not the private key as given")
	}

	if secret.StringData[IdentityPubKey] != pub {
		t.Errorf("identity.pub %q, want %q", secret.StringData[IdentityPubKey], pub)
	}

	if secret.StringData[KnownHostsKey] != strings.TrimSpace(hosts) {
		t.Errorf("known_hosts %q, want %q", secret.StringData[KnownHostsKey], strings.TrimSpace(hosts))
	}

	// What source-controller does with it: parse the identity and the known hosts.
	if _, err := ssh.ParsePrivateKey([]byte(secret.StringData[IdentityKey])); err != nil {
		t.Error(err)
	}

	if _, hosts, _, _, _, err := ssh.ParseKnownHosts([]byte(secret.StringData[KnownHostsKey])); err != nil || hosts[0] != "[127.0.0.1]:40022" {
		t.Errorf("known_hosts: hosts %v, %v", hosts, err)
	}

	// Without the public key, it is derived.
	s2, err := DeployKeySecret(priv, "", hosts)
	if err != nil || s2 != s {
		t.Errorf("without the public key: %v\n%s", err, s2)
	}
}

func TestDeployKeySecretOtherKeyFormats(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}

	// flux create secret git writes PKCS#8 keys.
	priv := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))

	if _, err := DeployKeySecret(priv, "", knownHostsLine(t, "git.example.com", 22)); err != nil {
		t.Error(err)
	}
}

func TestDeployKeySecretRefuses(t *testing.T) {
	priv, pub := genKey(t)
	_, otherPub := genKey(t)
	hosts := knownHostsLine(t, "git.example.com", 22)

	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	block, err := ssh.MarshalPrivateKeyWithPassphrase(k, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}

	encrypted := string(pem.EncodeToMemory(block))

	for name, args := range map[string][3]string{
		"not a key":              {"hello", pub, hosts},
		"public key as private":  {pub, pub, hosts},
		"encrypted":              {encrypted, "", hosts},
		"another public key":     {priv, otherPub, hosts},
		"two public keys":        {priv, pub + otherPub, hosts},
		"public key not a key":   {priv, "ssh-ed25519 nonsense", hosts},
		"no known hosts":         {priv, pub, ""},
		"known hosts comment":    {priv, pub, "# nothing\n"},
		"known hosts not a line": {priv, pub, "git.example.com\n"},
		"known hosts bad line":   {priv, pub, hosts + "git.example.com ssh-ed25519 AAAA\n"},
	} {
		if s, err := DeployKeySecret(args[0], args[1], args[2]); err == nil {
			t.Errorf("%s: accepted:\n%s", name, s)
		} else if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "AAAA") {
			t.Errorf("%s: the error quotes a key: %v", name, err)
		}
	}
}
