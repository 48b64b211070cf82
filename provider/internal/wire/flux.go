package wire

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/flux"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/lifecycle"
)

// The names of Flux's manifests in the manifest sync.
const (
	fluxInstallManifest = "flux-install"
	fluxSyncManifest    = "flux-sync"
	fluxKeyManifest     = "flux-deploy-key"
)

// fluxManifests are the manifests the sync applies for flux, after the health gate, as `flux
// bootstrap git` applies them: Flux's controllers (built into the plugin: no network at run
// time), the Secret with the repository's credentials — the user's sshKey, or a deploy key the
// DeployKey resource makes and keeps (whose public half it returns, for the user to add to the git
// host) — and the GitRepository and Kustomization that sync the cluster from the repository. With
// secretRef the user's own Secret serves; a public (https) repository needs none; then the public
// key is empty.
func fluxManifests(s Scope, pass PassThrough, self pulumi.ResourceOption) (pulumi.StringMap, pulumi.StringOutput, error) {
	f := s.Cluster.Flux
	none := pulumi.String("").ToStringOutput()

	install, err := flux.Install()
	if err != nil {
		return nil, none, err
	}

	public := f.SecretRef == "" && !f.GenerateKey && !f.SSHKey

	sync, err := flux.Sync(flux.SyncOptions{URL: f.URL, Branch: f.Branch, Path: f.Path, SecretRef: f.SecretRef, Public: public})
	if err != nil {
		return nil, none, err
	}

	out := pulumi.StringMap{fluxInstallManifest: pulumi.String(install), fluxSyncManifest: pulumi.String(sync)}

	var private, pub pulumi.StringOutput

	switch {
	case f.SecretRef != "", public:
		return out, none, nil
	case f.GenerateKey:
		in, a := lifecycle.DeployKeyKind.Inputs()
		lifecycle.Set(in, &a.Rotation, pulumi.String(f.KeyRotation))

		key, err := lifecycle.DeployKeyKind.Register(s.Ctx, s.child("flux-deploy-key"), in, s.parent(), self)
		if err != nil {
			return nil, none, errorf("registering Flux's deploy key: %w", err)
		}

		private, pub = key.PrivateKey, key.PublicKey
	default:
		private = pass.FluxSSHKey.ToStringOutput()
		// The public half of a secret key is no secret: the user adds it to the git host.
		pub = pulumi.Unsecret(private.ApplyT(spec.FluxPublicKey)).(pulumi.StringOutput)
	}

	knownHosts := f.KnownHosts
	out[fluxKeyManifest] = pulumi.ToSecret(pulumi.All(private, pub).ApplyT(func(v []any) (string, error) {
		return flux.DeployKeySecret(v[0].(string), v[1].(string), knownHosts)
	})).(pulumi.StringOutput)

	return out, pub, nil
}
