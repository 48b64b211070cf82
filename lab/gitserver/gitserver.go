// Package gitserver is the lab's git server, standing in for the user's Flux repository: bare
// repositories the test seeds, served on 127.0.0.1 over SSH to the public keys the test
// authorizes (no other key gets in) and over HTTP with basic auth. It is
// github.com/fluxcd/pkg/gittestserver (Flux's own test server, gitkit running the system's
// git-upload-pack and git-receive-pack) with an ed25519 host key the test knows (KnownHosts), so
// a Secret made of a deploy key and KnownHosts is what source-controller would need.
//
// Clone is a real clone with go-git over SSH, the client library source-controller uses, with the
// host key checked against KnownHosts: it proves a private key is accepted, or not.
package gitserver

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fluxcd/gitkit"
	"github.com/fluxcd/pkg/gittestserver"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// DefaultBranch is the branch Seed commits to when it is given none.
const DefaultBranch = "main"

// Server is one running git server; Start stops it when the test ends.
type Server struct {
	tb       testing.TB
	srv      *gittestserver.GitServer
	hostKey  ssh.PublicKey
	sshAddr  string // 127.0.0.1:port
	user     string
	password string

	mu         sync.Mutex
	authorized map[string]bool // "<type> <base64>" of each authorized key
}

// lookupMu serialises setting gittestserver's package-level key lookup and starting the SSH
// listener, which copies it: each server keeps its own.
var lookupMu sync.Mutex

// Start runs a server with no repository and no authorized key.
func Start(tb testing.TB) *Server {
	tb.Helper()

	// gitkit runs them by name, on PATH.
	for _, bin := range []string{"git-upload-pack", "git-receive-pack"} {
		if _, err := exec.LookPath(bin); err != nil {
			tb.Fatalf("gitserver: the server runs the system's git: %v", err)
		}
	}

	keyDir := tb.TempDir()

	hostKey, err := writeHostKey(filepath.Join(keyDir, "gitkit.rsa")) // the name gitkit reads
	if err != nil {
		tb.Fatal(err)
	}

	s := &Server{
		tb:         tb,
		hostKey:    hostKey,
		user:       "flux",
		password:   rand.Text(),
		authorized: map[string]bool{},
	}
	s.srv = gittestserver.NewGitServer(tb.TempDir()).KeyDir(keyDir).Auth(s.user, s.password)

	lookupMu.Lock()
	s.srv.PublicKeyLookupFunc(s.lookup)
	err = s.srv.ListenSSH()
	lookupMu.Unlock()

	if err != nil {
		tb.Fatalf("gitserver: ssh listener: %v", err)
	}

	u, err := url.Parse(s.srv.SSHAddress())
	if err != nil {
		tb.Fatal(err)
	}

	s.sshAddr = u.Host

	go func() { _ = s.srv.StartSSH() }() // returns when the listener closes

	if err := s.srv.StartHTTP(); err != nil {
		_ = s.srv.StopSSH()

		tb.Fatalf("gitserver: http: %v", err)
	}

	tb.Cleanup(func() {
		s.srv.StopHTTP()
		_ = s.srv.StopSSH()
	})

	return s
}

// writeHostKey writes a new ed25519 host key (OpenSSH PEM) to path and returns its public key.
func writeHostKey(path string) (ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}

	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, err
	}

	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}

	return ssh.NewPublicKey(pub)
}

// lookup is gitkit's key check: the key, as "<type> <base64>", must be authorized.
func (s *Server) lookup(content string) (*gitkit.PublicKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if !s.authorized[content] {
		return nil, errors.New("gitserver: public key not authorized")
	}

	return &gitkit.PublicKey{Id: "flux", Content: content}, nil
}

// canonicalKey is an authorized_keys line as gitkit hands keys to lookup: type and key, no
// comment, no options.
func canonicalKey(pubAuthorized string) (string, error) {
	k, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(pubAuthorized))
	if err != nil {
		return "", fmt.Errorf("gitserver: not an authorized_keys line: %w", err)
	}

	if strings.TrimSpace(string(rest)) != "" {
		return "", errors.New("gitserver: more than one key")
	}

	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))), nil
}

// Authorize lets the key (an authorized_keys line, e.g. a deploy key's identity.pub) read and
// write every repository over SSH.
func (s *Server) Authorize(pubAuthorized string) {
	s.tb.Helper()

	k, err := canonicalKey(pubAuthorized)
	if err != nil {
		s.tb.Fatal(err)
	}

	s.mu.Lock()
	s.authorized[k] = true
	s.mu.Unlock()
}

// Revoke takes the key's access away again (for new connections), as removing a deploy key does.
func (s *Server) Revoke(pubAuthorized string) {
	s.tb.Helper()

	k, err := canonicalKey(pubAuthorized)
	if err != nil {
		s.tb.Fatal(err)
	}

	s.mu.Lock()
	delete(s.authorized, k)
	s.mu.Unlock()
}

// repoDir is the repository's name on the server: repo with ".git" appended if it lacks it.
func repoDir(repo string) string {
	repo = strings.Trim(repo, "/")
	if !strings.HasSuffix(repo, ".git") {
		repo += ".git"
	}

	return repo
}

// SSHURL is the repository's URL for Flux: ssh://git@127.0.0.1:<port>/<repo>.git.
func (s *Server) SSHURL(repo string) string {
	return "ssh://git@" + s.sshAddr + "/" + repoDir(repo)
}

// HTTPURL is the repository's URL over HTTP (basic auth, see HTTPAuth), without credentials.
func (s *Server) HTTPURL(repo string) string {
	return s.srv.HTTPAddress() + "/" + repoDir(repo)
}

// HTTPAuth is the user name and password HTTP requires (made when the server starts).
func (s *Server) HTTPAuth() (username, password string) {
	return s.user, s.password
}

// SSHAddr is the SSH listener's address, 127.0.0.1:<port>.
func (s *Server) SSHAddr() string {
	return s.sshAddr
}

// HostKey is the server's SSH host key.
func (s *Server) HostKey() ssh.PublicKey {
	return s.hostKey
}

// KnownHosts is the server's host key as a known_hosts line, as `ssh-keyscan -p <port>
// 127.0.0.1` prints it (and a Flux Secret's known_hosts holds it):
// "[127.0.0.1]:<port> ssh-ed25519 AAAA…\n".
func (s *Server) KnownHosts() string {
	return knownhosts.Line([]string{knownhosts.Normalize(s.sshAddr)}, s.hostKey) + "\n"
}
