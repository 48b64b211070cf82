package gitserver_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"maps"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/gitserver"
)

// newKey is a deploy key as the component makes one: ed25519, OpenSSH PEM, authorized_keys.
func newKey(t *testing.T) (privatePEM, publicAuthorized string) {
	t.Helper()

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}

	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}

	return string(pem.EncodeToMemory(block)), string(ssh.MarshalAuthorizedKey(k))
}

var fleet = map[string]string{
	"clusters/lab/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- podinfo.yaml\n",
	"clusters/lab/podinfo.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo\n  namespace: default\ndata:\n  greeting: hello\n",
	"README.md":                       "fleet\n",
}

func TestAuthorizedKeyClones(t *testing.T) {
	s := gitserver.Start(t)
	commit := s.Seed("fleet", "main", fleet)

	if len(commit) != 40 {
		t.Errorf("Seed returned %q, want a commit hash", commit)
	}

	priv, pub := newKey(t)
	s.Authorize(pub)

	got, err := s.Clone("fleet", "main", priv)
	if err != nil {
		t.Fatal(err)
	}

	if !maps.Equal(got, fleet) {
		t.Errorf("cloned %v, want %v", got, fleet)
	}

	if !strings.HasPrefix(s.SSHURL("fleet"), "ssh://git@127.0.0.1:") || !strings.HasSuffix(s.SSHURL("fleet"), "/fleet.git") {
		t.Errorf("SSHURL %s", s.SSHURL("fleet"))
	}
}

func TestUnauthorizedKeyIsRefused(t *testing.T) {
	s := gitserver.Start(t)
	s.Seed("fleet", "", fleet)

	priv, pub := newKey(t)
	other, _ := newKey(t)
	s.Authorize(pub)

	if err := s.CanClone("fleet", "main", other); err == nil {
		t.Fatal("a key that was never authorized cloned")
	}

	if err := s.CanClone("fleet", "main", priv); err != nil {
		t.Fatalf("the authorized key, after a refused one: %v", err)
	}

	s.Revoke(pub)

	if err := s.CanClone("fleet", "main", priv); err == nil {
		t.Fatal("a revoked key cloned")
	}
}

// TestKeysAreThisServers: a key authorized on one server opens no other.
func TestKeysAreThisServers(t *testing.T) {
	a, b := gitserver.Start(t), gitserver.Start(t)
	a.Seed("fleet", "", fleet)
	b.Seed("fleet", "", fleet)

	priv, pub := newKey(t)
	a.Authorize(pub)

	if err := a.CanClone("fleet", "", priv); err != nil {
		t.Fatal(err)
	}

	if err := b.CanClone("fleet", "", priv); err == nil {
		t.Fatal("server b accepted a key authorized on a only")
	}
}

func TestKnownHostsIsTheHostKey(t *testing.T) {
	s := gitserver.Start(t)

	_, hosts, key, _, rest, err := ssh.ParseKnownHosts([]byte(s.KnownHosts()))
	if err != nil || len(rest) != 0 {
		t.Fatalf("KnownHosts %q: %v", s.KnownHosts(), err)
	}

	if len(hosts) != 1 || hosts[0] != "["+strings.Replace(s.SSHAddr(), ":", "]:", 1) || key.Type() != ssh.KeyAlgoED25519 {
		t.Errorf("KnownHosts %q for %s", s.KnownHosts(), s.SSHAddr())
	}

	// The client checks the host key: another server's known_hosts line, even for this
	// address, is refused.
	other := gitserver.Start(t)
	if string(key.Marshal()) == string(other.HostKey().Marshal()) {
		t.Fatal("two servers share a host key")
	}

	s.Seed("fleet", "", fleet)

	priv, pub := newKey(t)
	s.Authorize(pub)

	if _, err := s.CloneWith("fleet", "", priv, s.KnownHosts()); err != nil {
		t.Fatal(err)
	}

	host, _, _ := strings.Cut(s.KnownHosts(), " ")
	_, otherKey, _ := strings.Cut(other.KnownHosts(), " ")

	wrong := host + " " + otherKey
	if _, err := s.CloneWith("fleet", "", priv, wrong); err == nil {
		t.Error("cloned with a known_hosts line of another host key")
	}

	if _, err := s.CloneWith("fleet", "", priv, ""); err == nil {
		t.Error("cloned with an empty known_hosts")
	}
}

func TestSeedMakesCommitsOnBranches(t *testing.T) {
	s := gitserver.Start(t)
	priv, pub := newKey(t)
	s.Authorize(pub)

	first := s.Seed("fleet", "main", fleet)
	second := s.Seed("fleet", "main", map[string]string{"clusters/lab/podinfo.yaml": "changed\n"})
	s.Seed("fleet", "staging", map[string]string{"a/b/c.yaml": "deep\n"})

	if first == second {
		t.Error("a second Seed made no new commit")
	}

	got, err := s.Clone("fleet", "main", priv)
	if err != nil {
		t.Fatal(err)
	}

	if want := map[string]string{"clusters/lab/podinfo.yaml": "changed\n"}; !maps.Equal(got, want) {
		t.Errorf("main after the second Seed: %v, want %v", got, want)
	}

	got, err = s.Clone("fleet", "staging", priv)
	if err != nil {
		t.Fatal(err)
	}

	if want := map[string]string{"a/b/c.yaml": "deep\n"}; !maps.Equal(got, want) {
		t.Errorf("staging: %v, want %v", got, want)
	}

	if err := s.CanClone("fleet", "nope", priv); err == nil {
		t.Error("a branch that does not exist cloned")
	}

	if err := s.CanClone("other", "main", priv); err == nil {
		t.Error("a repository that does not exist cloned")
	}
}

func TestHTTPNeedsTheCredentials(t *testing.T) {
	s := gitserver.Start(t)
	s.Seed("fleet", "", fleet)

	user, password := s.HTTPAuth()

	got, err := s.CloneHTTP("fleet", "", user, password)
	if err != nil {
		t.Fatal(err)
	}

	if !maps.Equal(got, fleet) {
		t.Errorf("cloned over HTTP %v, want %v", got, fleet)
	}

	if _, err := s.CloneHTTP("fleet", "", "", ""); err == nil {
		t.Error("cloned over HTTP without credentials")
	}

	if _, err := s.CloneHTTP("fleet", "", user, password+"x"); err == nil {
		t.Error("cloned over HTTP with a wrong password")
	}
}
