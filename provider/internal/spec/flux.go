package spec

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/flux"
)

// FluxInput bootstraps Flux (nil: not installed).
type FluxInput struct {
	Version     string
	URL         string
	Branch      string
	Path        string
	SSHKey      bool // sshKey is set (its value is a pass-through input)
	SecretRef   string
	KnownHosts  string
	KeyRotation string
}

// Flux is what flux makes: Flux's controllers at Version, and the GitRepository and Kustomization
// flux-system that sync Path of URL's Branch. The repository's credentials are the Secret
// flux-system/flux-system the component writes — with the user's sshKey, or with a deploy key it
// generates (GenerateKey) — or the user's own Secret SecretRef.
type Flux struct {
	Version     string
	URL         string
	Branch      string
	Path        string
	SecretRef   string
	GenerateKey bool
	// SSHKey: the user's sshKey is the repository's key. Without it, GenerateKey or SecretRef
	// the repository is public (an https one): no credentials.
	SSHKey      bool
	KnownHosts  string
	KeyRotation string
}

func buildFlux(p *problems, in Input, c *Cluster) {
	f := in.Flux
	if f == nil {
		return
	}

	out := &Flux{
		Version: firstString(f.Version, flux.Version), URL: f.URL, Branch: firstString(f.Branch, "main"),
		Path: firstString(f.Path, "clusters/"+c.Name), SecretRef: f.SecretRef, KnownHosts: f.KnownHosts, KeyRotation: f.KeyRotation,
	}

	if !slices.Contains(flux.Versions(), out.Version) {
		p.errorf("flux.version", "%q is not a Flux version the component carries (it installs Flux without network access, "+
			"from manifests built into it); use one of %s", f.Version, strings.Join(flux.Versions(), ", "))
	}

	requireManifestSync(p, c, "flux", "Flux is installed by the manifest sync")

	sshURL := checkFluxURL(p, f.URL)

	switch {
	case f.SSHKey && f.SecretRef != "":
		p.errorf("flux.secretRef", "is set beside flux.sshKey; give one: sshKey (the component writes the Secret) or secretRef (yours)")
	case f.SecretRef != "" && !isDNSSubdomain(f.SecretRef):
		p.errorf("flux.secretRef", "%q is not a Secret name", f.SecretRef)
	case f.SecretRef == "" && sshURL:
		out.GenerateKey, out.SSHKey = !f.SSHKey, f.SSHKey
		checkKnownHosts(p, f.KnownHosts)
	case f.SecretRef == "" && f.SSHKey:
		p.errorf("flux.sshKey", "is set, but flux.gitRepository.url is not an ssh:// URL; use ssh://, or remove sshKey")
	}

	if f.KnownHosts != "" && f.SecretRef != "" {
		p.errorf("flux.knownHosts", "is set beside flux.secretRef: the known hosts go in your Secret (key known_hosts)")
	}

	if !tokenRotationRe.MatchString(f.KeyRotation) {
		p.errorf("flux.keyRotation", "must be printable ASCII (any value: a new one makes a new deploy key)")
	}

	if err := flux.CheckBranch(out.Branch); err != nil {
		p.errorf("flux.gitRepository.branch", "%s", strings.TrimPrefix(err.Error(), "flux: "))
	}

	if err := flux.CheckPath(out.Path); err != nil {
		p.errorf("flux.gitRepository.path", "%s; it must be a path inside the repository, e.g. \"clusters/%s\"",
			strings.TrimPrefix(err.Error(), "flux: "), c.Name)
	}

	c.Flux = out
}

// checkFluxURL checks the repository URL and tells whether it is an ssh:// one.
func checkFluxURL(p *problems, raw string) bool {
	const at = "flux.gitRepository.url"

	if raw == "" {
		p.errorf(at, "is required: the repository Flux syncs the cluster from, e.g. ssh://git@github.com/me/fleet")
		return false
	}

	if user, rest, ok := strings.Cut(raw, "@"); ok && !strings.Contains(user, "://") && strings.Contains(rest, ":") {
		host, repo, _ := strings.Cut(rest, ":")
		p.errorf(at, "%q is scp-like; Flux needs a URL: ssh://%s@%s/%s", raw, user, host, repo)

		return false
	}

	if err := flux.CheckURL(raw); err != nil {
		p.errorf(at, "%s; use ssh://git@<host>/<repository> or https://<host>/<repository>", strings.TrimPrefix(err.Error(), "flux: "))
		return false
	}

	u, _ := url.Parse(raw)

	return u.Scheme == "ssh"
}

// checkKnownHosts checks flux.knownHosts, which an ssh:// repository needs (Flux refuses a host it
// does not know).
func checkKnownHosts(p *problems, text string) {
	const at = "flux.knownHosts"

	if strings.TrimSpace(text) == "" {
		p.errorf(at, "is required for an ssh:// repository: the git host's key in known_hosts format (`ssh-keyscan <host>`)")
		return
	}

	rest := []byte(text)
	for len(strings.TrimSpace(string(rest))) > 0 {
		var err error
		if _, _, _, _, rest, err = ssh.ParseKnownHosts(rest); errors.Is(err, io.EOF) {
			return // only comments were left
		} else if err != nil {
			p.errorf(at, "is not in known_hosts format: %s; use the output of `ssh-keyscan <host>`", oneLine(err.Error()))
			return
		}
	}
}

// FluxPublicKey is the authorized_keys line of an OpenSSH private key (a user's sshKey).
func FluxPublicKey(privatePEM string) (string, error) {
	signer, err := ssh.ParsePrivateKey([]byte(privatePEM))
	if err != nil {
		return "", fmt.Errorf("flux.sshKey: is not an unencrypted OpenSSH private key: %w", err)
	}

	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), nil
}

// requireManifestSync refuses input (set) without the manifest sync, which alone reaches a
// running cluster (Talos applies inline manifests only at bootstrap), saying why it needs it.
func requireManifestSync(p *problems, c *Cluster, input, why string) {
	if !c.ManifestSync.Enabled {
		p.errorf(input, "%s, which manifestSync.enabled: false turns off; enable it or remove %s", why, input)
	}
}
