package wire

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve"
	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/permission"
	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/user"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"sigs.k8s.io/yaml"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// GeneratedManifest is a manifest the component makes from its children's outputs.
type GeneratedManifest struct {
	Name     string
	Contents pulumi.StringOutput
}

// ProxmoxAPI is where the consumers of the Proxmox tokens reach Proxmox: the proxmoxve
// provider's endpoint, and whether its certificate is checked.
type ProxmoxAPI struct {
	Endpoint string
	Insecure bool
}

// Tokens are the consumers' tokens ProxmoxTokens registered, whose ACLs TokenACLs registers once
// the VMs are: the Secrets that carry them to the consumers, as manifests.
type Tokens struct {
	Manifests []GeneratedManifest
	made      []madeToken
}

// madeToken is one consumer's role, user and token.
type madeToken struct {
	spec.ProxmoxToken
	role  *permission.Role
	user  *permission.User
	token *user.Token
}

// ProxmoxTokens registers each consumer's token (spec.ProxmoxToken) through the proxmoxve
// provider the VMs use: its role with exactly the consumer's privileges, a user of the pve realm
// without a password, and an API token of that user with privilege separation (its ACLs come with
// the VMs: TokenACLs). It returns the Secrets that carry the tokens to the consumers, as
// manifests: the token's value is a secret output of the proxmoxve provider, and stays one in the
// manifests, the configurations and the state. The consumers reach the Proxmox API at api's
// endpoint, which must be known.
//
// A new tokenRotation value names a new token: Pulumi makes it (and its ACLs) before it deletes
// the old one, and the consumers' pods restart with it (their token annotation changes).
func ProxmoxTokens(s Scope, api ProxmoxAPI) (*Tokens, error) {
	out := &Tokens{}

	if len(s.Cluster.ProxmoxTokens) > 0 && api.Endpoint == "" {
		return nil, errorf("%s: the Proxmox API its token is for is unknown: the proxmoxve provider's endpoint could not be read; "+
			"set proxmoxve:endpoint (or the explicit provider's endpoint input)", s.Cluster.ProxmoxTokens[0].Input)
	}

	for _, t := range s.Cluster.ProxmoxTokens {
		name := s.child("proxmox-" + t.Consumer)
		what := fmt.Sprintf("%s's Proxmox token", t.Input)
		comment := pulumi.String(fmt.Sprintf("%s of the Talos cluster %s (made by pulumi-talos-proxmox)", t.Consumer, s.Cluster.Name))

		role, err := permission.NewRole(s.Ctx, name+"-role", &permission.RoleArgs{
			RoleId: pulumi.String(t.RoleID), Privileges: pulumi.ToStringArray(t.Privileges),
		}, s.parent())
		if err != nil {
			return nil, errorf("registering the role of %s: %w", what, err)
		}

		u, err := permission.NewUser(s.Ctx, name+"-user", &permission.UserArgs{
			UserId: pulumi.String(t.UserID), Comment: comment, Enabled: pulumi.Bool(true),
		}, s.parent())
		if err != nil {
			return nil, errorf("registering the user of %s: %w", what, err)
		}

		tok, err := user.NewToken(s.Ctx, name+"-token", &user.TokenArgs{
			UserId: u.UserId, TokenName: pulumi.String(t.TokenName), Comment: comment, PrivilegesSeparation: pulumi.Bool(true),
		}, s.parent())
		if err != nil {
			return nil, errorf("registering %s: %w", what, err)
		}

		out.made = append(out.made, madeToken{ProxmoxToken: t, role: role, user: u, token: tok})
		out.Manifests = append(out.Manifests, GeneratedManifest{Name: t.SecretName, Contents: tokenSecret(s.Cluster, t, api, tok.Value)})
	}

	return out, nil
}

// TokenACLs registers, for each token and its user alike (a separated token holds only what both
// hold), an ACL with the consumer's role on each node's VM — the path made from the VM's id, and
// the ACL replaced with the VM: Proxmox removes a VM's ACLs when it deletes the VM — and on each
// of the token's datastores.
func TokenACLs(s Scope, tokens *Tokens, m *Machines) error {
	for _, t := range tokens.made {
		name := s.child("proxmox-" + t.Consumer)

		type grant struct {
			key  string
			path pulumi.StringInput
			opts []pulumi.ResourceOption
		}

		var grants []grant
		for _, n := range s.Cluster.Nodes {
			grants = append(grants, grant{"vm-" + n.Name, pulumi.Sprintf("/vms/%d", m.VMIDs[n.Name]), m.Instance(n.Name)})
		}

		for _, ds := range t.Storages {
			grants = append(grants, grant{"storage-" + ds, pulumi.String("/storage/" + ds), nil})
		}

		for _, g := range grants {
			// The token's ACL names its token (id user!name), so a rotated token gets its own.
			for _, acl := range []struct {
				who  string
				args proxmoxve.AclArgs
			}{
				{"user", proxmoxve.AclArgs{UserId: t.user.UserId}},
				{"token", proxmoxve.AclArgs{TokenId: t.token.ID().ToStringOutput()}},
			} {
				acl.args.Path, acl.args.RoleId, acl.args.Propagate = g.path, t.role.RoleId, pulumi.Bool(false)

				opts := append([]pulumi.ResourceOption{s.parent()}, g.opts...)
				if _, err := proxmoxve.NewAcl(s.Ctx, fmt.Sprintf("%s-acl-%s-%s", name, acl.who, g.key), &acl.args, opts...); err != nil {
					return errorf("registering the ACL of %s's Proxmox token on %s: %w", t.Input, g.key, err)
				}
			}
		}
	}

	return nil
}

// tokenSecret is the Secret that gives a consumer its cloud config (the same format for the CSI
// plugin and the CCM): the Proxmox API, the token, and the region its Nodes are labelled with.
func tokenSecret(c *spec.Cluster, t spec.ProxmoxToken, api ProxmoxAPI, value pulumi.StringOutput) pulumi.StringOutput {
	url := strings.TrimSuffix(api.Endpoint, "/")
	if !strings.HasSuffix(url, "/api2/json") {
		url += "/api2/json"
	}

	secret := value.ApplyT(func(v string) (string, error) {
		// The proxmoxve provider's value is the whole token, user@realm!name=secret.
		_, sec, _ := strings.Cut(v, "=")

		cloud, err := yaml.Marshal(map[string]any{"clusters": []any{map[string]any{
			"url": url, "insecure": api.Insecure, "token_id": t.TokenID(), "token_secret": sec, "region": c.ProxmoxClusterName,
		}}})
		if err != nil {
			return "", err
		}

		doc, err := yaml.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
			"metadata": map[string]any{"name": t.SecretName, "namespace": t.Namespace},
			"data":     map[string]any{spec.CloudConfigKey: base64.StdEncoding.EncodeToString(cloud)},
		})

		return string(doc), err
	}).(pulumi.StringOutput)

	return pulumi.ToSecret(secret).(pulumi.StringOutput)
}
