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

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/proxmox"
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

// ProxmoxTokens registers each consumer's token (spec.ProxmoxToken) through the proxmoxve
// provider the VMs use: its role with exactly the consumer's privileges, a user of the pve
// realm without a password, an API token of that user with privilege separation, and an ACL for
// the user and one for the token on each path the consumer works on (proxmox.TokenACLPaths) — a
// separated token holds only what both hold. It returns the Secrets that carry the tokens to the
// consumers, as manifests: the token's value is a secret output of the proxmoxve provider, and
// stays one in the manifests, the configurations and the state.
//
// A new tokenRotation value names a new token: Pulumi makes it (and its ACLs) before it deletes
// the old one, and the consumers' pods restart with it (their token annotation changes).
func ProxmoxTokens(s Scope, api ProxmoxAPI, vmIDs map[string]int) ([]GeneratedManifest, error) {
	var out []GeneratedManifest

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

		for _, path := range proxmox.TokenACLPaths(s.Cluster, t, vmIDs) {
			key := strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "-")

			// The token's ACL names its token (id user!name), so a rotated token gets its own.
			for _, acl := range []struct {
				suffix string
				args   proxmoxve.AclArgs
			}{
				{"user", proxmoxve.AclArgs{UserId: u.UserId}},
				{"token", proxmoxve.AclArgs{TokenId: tok.ID().ToStringOutput()}},
			} {
				acl.args.Path, acl.args.RoleId, acl.args.Propagate = pulumi.String(path), role.RoleId, pulumi.Bool(false)

				if _, err := proxmoxve.NewAcl(s.Ctx, fmt.Sprintf("%s-acl-%s-%s", name, acl.suffix, key), &acl.args, s.parent()); err != nil {
					return nil, errorf("registering the ACL of %s on %s: %w", what, path, err)
				}
			}
		}

		out = append(out, GeneratedManifest{Name: t.SecretName, Contents: tokenSecret(s.Cluster, t, api, tok.Value)})
	}

	return out, nil
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
