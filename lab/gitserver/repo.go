package gitserver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/memory"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Seed commits files (slash paths relative to the repository's root → contents) as the whole
// tree of a new commit on branch (DefaultBranch when empty), on top of the branch's head if it
// has one: a file of the previous commit that files lacks is deleted. The repository is created
// (bare, HEAD on branch) on the first Seed. It returns the commit's hash.
func (s *Server) Seed(repo, branch string, files map[string]string) string {
	s.tb.Helper()

	if branch == "" {
		branch = DefaultBranch
	}

	h, err := s.seed(repo, branch, files)
	if err != nil {
		s.tb.Fatalf("gitserver: seed %s %s: %v", repo, branch, err)
	}

	return h
}

func (s *Server) seed(repo, branch string, files map[string]string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	dir := filepath.Join(s.srv.Root(), repoDir(repo))

	r, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if r, err = git.PlainInit(dir, true); err == nil {
			err = r.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName(branch)))
		}
	}

	if err != nil {
		return "", err
	}

	tree, err := writeTree(r.Storer, files)
	if err != nil {
		return "", err
	}

	ref := plumbing.NewBranchReferenceName(branch)

	var parents []plumbing.Hash

	switch head, err := r.Storer.Reference(ref); {
	case err == nil:
		parents = []plumbing.Hash{head.Hash()}
	case !errors.Is(err, plumbing.ErrReferenceNotFound):
		return "", err
	}

	sig := object.Signature{Name: "lab", Email: "lab@127.0.0.1", When: time.Now()}
	c := &object.Commit{
		Author:       sig,
		Committer:    sig,
		Message:      fmt.Sprintf("lab: %d files\n", len(files)),
		TreeHash:     tree,
		ParentHashes: parents,
	}

	obj := r.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return "", err
	}

	h, err := r.Storer.SetEncodedObject(obj)
	if err != nil {
		return "", err
	}

	return h.String(), r.Storer.SetReference(plumbing.NewHashReference(ref, h))
}

// writeTree stores the blobs and trees of files and returns the root tree's hash.
func writeTree(st storage.Storer, files map[string]string) (plumbing.Hash, error) {
	type node struct {
		files map[string]string // name → contents
		dirs  map[string]map[string]string
	}

	n := node{files: map[string]string{}, dirs: map[string]map[string]string{}}

	for p, contents := range files {
		clean := path.Clean(p)
		if p == "" || path.IsAbs(p) || clean != p || clean == "." || strings.HasPrefix(clean, "../") || clean == ".." {
			return plumbing.ZeroHash, fmt.Errorf("file %q: want a clean relative slash path", p)
		}

		first, rest, sub := strings.Cut(clean, "/")
		if !sub {
			n.files[first] = contents

			continue
		}

		if n.dirs[first] == nil {
			n.dirs[first] = map[string]string{}
		}

		n.dirs[first][rest] = contents
	}

	var entries []object.TreeEntry

	for name, contents := range n.files {
		if _, clash := n.dirs[name]; clash {
			return plumbing.ZeroHash, fmt.Errorf("%q is both a file and a directory", name)
		}

		obj := st.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)

		w, err := obj.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}

		if _, err := io.WriteString(w, contents); err != nil {
			return plumbing.ZeroHash, err
		}

		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}

		h, err := st.SetEncodedObject(obj)
		if err != nil {
			return plumbing.ZeroHash, err
		}

		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
	}

	for name, sub := range n.dirs {
		h, err := writeTree(st, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}

		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}

	// Git orders a tree's entries by name, a directory's name as if it ended with "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}

		return e.Name
	}
	slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(key(a), key(b)) })

	obj := st.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}

	return st.SetEncodedObject(obj)
}

// Clone clones branch (DefaultBranch when empty) of repo over SSH with privatePEM as
// source-controller would (go-git, user git, the host key checked against KnownHosts) and
// returns the files of its head commit (path → contents).
func (s *Server) Clone(repo, branch, privatePEM string) (map[string]string, error) {
	return s.CloneWith(repo, branch, privatePEM, s.KnownHosts())
}

// CloneWith is Clone with the client's known_hosts given, e.g. the identity and known_hosts of
// the Secret the component wrote for Flux.
func (s *Server) CloneWith(repo, branch, privatePEM, knownHosts string) (map[string]string, error) {
	auth, err := gitssh.NewPublicKeys("git", []byte(privatePEM), "")
	if err != nil {
		return nil, fmt.Errorf("gitserver: private key: %w", err)
	}

	hosts, err := os.CreateTemp("", "gitserver-known-hosts-")
	if err != nil {
		return nil, err
	}

	defer func() { _ = os.Remove(hosts.Name()) }()

	_, err = hosts.WriteString(knownHosts)
	if cerr := hosts.Close(); err == nil {
		err = cerr
	}

	if err != nil {
		return nil, err
	}

	if auth.HostKeyCallback, err = knownhosts.New(hosts.Name()); err != nil {
		return nil, fmt.Errorf("gitserver: known_hosts: %w", err)
	}

	return clone(s.SSHURL(repo), branch, auth)
}

// CanClone is Clone's error alone: nil when the key is accepted and the branch cloned.
func (s *Server) CanClone(repo, branch, privatePEM string) error {
	_, err := s.Clone(repo, branch, privatePEM)

	return err
}

// CloneHTTP clones branch of repo over HTTP with the given basic auth (none when username is
// empty) and returns the files of its head commit.
func (s *Server) CloneHTTP(repo, branch, username, password string) (map[string]string, error) {
	var auth transport.AuthMethod
	if username != "" {
		auth = &githttp.BasicAuth{Username: username, Password: password}
	}

	return clone(s.HTTPURL(repo), branch, auth)
}

func clone(u, branch string, auth transport.AuthMethod) (map[string]string, error) {
	if branch == "" {
		branch = DefaultBranch
	}

	fs := memfs.New()

	_, err := git.Clone(memory.NewStorage(), fs, &git.CloneOptions{
		URL:           u,
		Auth:          auth,
		ReferenceName: plumbing.NewBranchReferenceName(branch),
		SingleBranch:  true,
		Depth:         1,
	})
	if err != nil {
		return nil, fmt.Errorf("gitserver: clone %s %s: %w", u, branch, err)
	}

	out := map[string]string{}

	return out, walk(fs, "/", out)
}

func walk(fs billy.Filesystem, dir string, out map[string]string) error {
	infos, err := fs.ReadDir(dir)
	if err != nil {
		return err
	}

	for _, fi := range infos {
		p := path.Join(dir, fi.Name())
		if fi.IsDir() {
			if err := walk(fs, p, out); err != nil {
				return err
			}

			continue
		}

		f, err := fs.Open(p)
		if err != nil {
			return err
		}

		b, err := io.ReadAll(f)
		_ = f.Close()

		if err != nil {
			return err
		}

		out[strings.TrimPrefix(p, "/")] = string(b)
	}

	return nil
}
