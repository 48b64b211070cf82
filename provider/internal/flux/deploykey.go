package flux

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Keys of the deploy key's Secret, as source-controller reads them.
const (
	IdentityKey    = "identity"
	IdentityPubKey = "identity.pub"
	KnownHostsKey  = "known_hosts"
)

// GenerateDeployKey makes an ed25519 SSH key pair for Flux to read the repository with: the
// private key PEM-encoded in the OpenSSH format ("OPENSSH PRIVATE KEY", unencrypted), the
// public key in authorized_keys format ("ssh-ed25519 AAAA…\n"), to add to the repository as a
// read-only deploy key.
func GenerateDeployKey() (privatePEM, publicAuthorized string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}

	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return "", "", err
	}

	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", "", err
	}

	return string(pem.EncodeToMemory(block)), string(ssh.MarshalAuthorizedKey(sshPub)), nil
}

// DeployKeySecret renders the Secret flux-system/flux-system the GitRepository of Sync reads,
// as `flux create secret git` (and `flux bootstrap git`) writes it: stringData identity (the
// private key as given), identity.pub (its public key, authorized_keys format) and
// known_hosts (the server's host keys, trimmed). privateKeyPEM is any unencrypted key
// golang.org/x/crypto/ssh parses (OpenSSH, PKCS#8, PKCS#1, SEC 1); publicKeyAuthorized, when not
// empty, must be its public key; knownHosts must hold at least one known_hosts line.
func DeployKeySecret(privateKeyPEM, publicKeyAuthorized, knownHosts string) (string, error) {
	signer, err := ssh.ParsePrivateKey([]byte(privateKeyPEM))
	if err != nil {
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return "", errors.New("flux: the deploy key is encrypted; give it without a passphrase")
		}

		// The parser's message never quotes the key.
		return "", fmt.Errorf("flux: the deploy key is not a private key: %w", err)
	}

	pub := signer.PublicKey()

	if strings.TrimSpace(publicKeyAuthorized) != "" {
		given, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(publicKeyAuthorized))
		if err != nil {
			return "", fmt.Errorf("flux: the deploy key's public key is not in authorized_keys format: %w", err)
		}

		if len(bytes.TrimSpace(rest)) > 0 {
			return "", errors.New("flux: the deploy key's public key has more than one line")
		}

		if !bytes.Equal(given.Marshal(), pub.Marshal()) {
			return "", fmt.Errorf("flux: the public key %s is not the deploy key's (%s)", ssh.FingerprintSHA256(given), ssh.FingerprintSHA256(pub))
		}
	}

	hosts := strings.TrimSpace(knownHosts)
	if err := checkKnownHosts(hosts); err != nil {
		return "", err
	}

	secret := corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Namespace},
		StringData: map[string]string{
			IdentityKey:    privateKeyPEM,
			IdentityPubKey: string(ssh.MarshalAuthorizedKey(pub)),
			KnownHostsKey:  hosts,
		},
	}

	b, err := yaml.Marshal(secret)
	if err != nil {
		return "", err
	}

	// As flux2's manifestgen/sourcesecret: no empty creationTimestamp or status.
	b = bytes.Replace(b, []byte("  creationTimestamp: null\n"), nil, 1)
	b = bytes.Replace(b, []byte("status: {}\n"), nil, 1)

	return "---\n" + string(b), nil
}

// checkKnownHosts wants at least one known_hosts entry and nothing that is not one.
func checkKnownHosts(hosts string) error {
	rest := []byte(hosts)
	n := 0

	for {
		_, _, _, _, next, err := ssh.ParseKnownHosts(rest)
		if errors.Is(err, io.EOF) {
			break
		}

		if err != nil {
			return fmt.Errorf("flux: known_hosts: %w", err)
		}

		n++
		rest = next
	}

	if n == 0 {
		return errors.New("flux: known_hosts is empty: give the repository server's host keys (ssh-keyscan format)")
	}

	return nil
}
