package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
)

// The Proxmox CSI plugin and cloud controller manager (sergelogvinov/proxmox-csi-plugin and
// proxmox-cloud-controller-manager): the charts the proxmoxCsi and proxmoxCcm inputs install when
// they name no version or repository (their author's OCI registry, where both are released),
// the namespaces they run in, and the Secrets that carry their Proxmox API tokens.
const (
	ProxmoxCSIRelease             = "proxmox-csi-plugin"
	DefaultProxmoxCSIVersion      = "0.5.9"
	ProxmoxCCMRelease             = "proxmox-cloud-controller-manager"
	DefaultProxmoxCCMVersion      = "0.2.28"
	DefaultProxmoxChartRepository = "oci://ghcr.io/sergelogvinov/charts"
	// ProxmoxCSINamespace is where the chart puts the plugin (its namespace, created by the chart
	// with the privileged Pod Security level the node plugin needs).
	ProxmoxCSINamespace = "csi-proxmox"
	// ProxmoxCSIProvisioner is the plugin's CSI driver name (the chart's default provisionerName).
	ProxmoxCSIProvisioner = "csi.proxmox.sinextra.dev"
	// TokenAnnotation is the pod annotation that names the token a consumer's pods run with: a
	// rotated token changes it, so their pods restart with the new one before the old is deleted.
	TokenAnnotation = "talos-proxmox.dev/proxmox-token"
	// CloudConfigKey is the key of a consumer's Secret that holds its cloud config.
	CloudConfigKey = "config.yaml"
)

// ProxmoxCSIInput installs the Proxmox CSI plugin (nil: not installed).
type ProxmoxCSIInput struct {
	Chart          ChartPresetInput
	StorageClasses []StorageClassInput
	TokenRotation  string
}

// StorageClassInput is one StorageClass of the CSI plugin.
type StorageClassInput struct {
	Name          string
	Storage       string
	Default       *bool
	ReclaimPolicy string
	FSType        string
}

// ProxmoxCCMInput installs the Proxmox cloud controller manager (nil: not installed).
type ProxmoxCCMInput struct {
	Chart         ChartPresetInput
	TokenRotation string
}

// ProxmoxToken is a Proxmox API token the component makes for a consumer in the cluster (the CSI
// plugin, the CCM): a role with exactly Privileges, a user of the pve realm with no password, a
// token of that user with privilege separation, and ACLs on the paths the consumer works on —
// each node's VM (/vms/<id>) and the datastores of Storages (/storage/<id>) — for the user and
// the token alike (a separated token holds what both hold). The token reaches the consumer as the
// cloud config in Secret SecretName of Namespace.
type ProxmoxToken struct {
	// Input is the property that asks for it (proxmoxCsi, proxmoxCcm); Consumer a short name
	// ("csi", "ccm").
	Input, Consumer string
	RoleID          string
	UserID          string
	// TokenName is Consumer, with a suffix from tokenRotation when it is set: a new rotation
	// value makes a new token (the old one is deleted once the new one is in place).
	TokenName  string
	Privileges []string
	Storages   []string
	// StorageInputs are the properties that name each of Storages first.
	StorageInputs []string
	SecretName    string
	Namespace     string
}

// TokenID is the token's id as Proxmox and the consumers' cloud config spell it: user!name.
func (t ProxmoxToken) TokenID() string { return t.UserID + "!" + t.TokenName }

// The privileges of each consumer, as their authors document them (docs/install.md of each
// repository), cut to what the component's configuration of them uses:
//   - the CSI plugin allocates disks on the datastores (Datastore.AllocateSpace; Datastore.Allocate
//     to delete them; Datastore.Audit to read their capacity) and attaches them to the nodes' VMs
//     (VM.Config.Disk), which it finds through the cluster's resources (VM.Audit);
//   - the CCM finds each node's VM and reads its configuration (VM.Audit). Its optional features
//     that read the guest agent (`network: qemu`) or HA groups (`ha_group`) need more, which the
//     user grants when turning them on.
var (
	csiPrivileges = []string{"Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.Audit", "VM.Audit", "VM.Config.Disk"}
	ccmPrivileges = []string{"VM.Audit"}
)

var (
	tokenRotationRe = regexp.MustCompile(`^[\x20-\x7e]*$`)
	fsTypes         = []string{"ext4", "xfs"}
	reclaimPolicies = []string{"Delete", "Retain"}
)

// buildProxmoxCloud makes the tokens and chart releases of proxmoxCsi and proxmoxCcm.
func buildProxmoxCloud(p *problems, in Input, c *Cluster, names map[string]string) {
	if csi := in.ProxmoxCSI; csi != nil {
		t := proxmoxToken(p, c, "proxmoxCsi", "csi", csi.TokenRotation, csiPrivileges)
		t.Namespace = ProxmoxCSINamespace
		t.Storages, t.StorageInputs = csiStorages(p, csi.StorageClasses)

		preset := map[string]any{
			"createNamespace":         true,
			"existingConfigSecret":    t.SecretName,
			"existingConfigSecretKey": CloudConfigKey,
			"storageClass":            storageClassValues(csi.StorageClasses),
			// The controller runs on the control planes (as the chart's Talos values have it);
			// the node plugin on every node.
			"nodeSelector": map[string]any{"node-role.kubernetes.io/control-plane": ""},
			"tolerations":  []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}},
			"node":         map[string]any{"tolerations": []any{map[string]any{"operator": "Exists"}}},
			"controller":   map[string]any{"podAnnotations": map[string]any{TokenAnnotation: t.TokenID()}},
		}

		r := presetRelease(p, "proxmoxCsi", &csi.Chart, helmrender.Source{
			Chart: ProxmoxCSIRelease, Repository: DefaultProxmoxChartRepository, Version: DefaultProxmoxCSIVersion,
		}, preset)
		r.Namespace = ProxmoxCSINamespace

		c.ProxmoxTokens = append(c.ProxmoxTokens, t)
		c.HelmReleases = append(c.HelmReleases, r)
		names[ProxmoxCSIRelease] = "proxmoxCsi"
	}

	if ccm := in.ProxmoxCCM; ccm != nil {
		t := proxmoxToken(p, c, "proxmoxCcm", "ccm", ccm.TokenRotation, ccmPrivileges)
		t.Namespace = "kube-system"

		preset := map[string]any{
			"existingConfigSecret":    t.SecretName,
			"existingConfigSecretKey": CloudConfigKey,
			// On the control planes, as the chart's Talos values have it.
			"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
					map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
				}}},
			}}},
			"podAnnotations": map[string]any{TokenAnnotation: t.TokenID()},
		}

		r := presetRelease(p, "proxmoxCcm", &ccm.Chart, helmrender.Source{
			Chart: ProxmoxCCMRelease, Repository: DefaultProxmoxChartRepository, Version: DefaultProxmoxCCMVersion,
		}, preset)

		c.ProxmoxTokens = append(c.ProxmoxTokens, t)
		c.HelmReleases = append(c.HelmReleases, r)
		c.ExternalCloudProvider = true
		names[ProxmoxCCMRelease] = "proxmoxCcm"
	}
}

// proxmoxToken names a consumer's role, user, token and Secret after the cluster, so two clusters
// on one Proxmox never share them.
func proxmoxToken(p *problems, c *Cluster, input, consumer, rotation string, privileges []string) ProxmoxToken {
	t := ProxmoxToken{
		Input: input, Consumer: consumer, Privileges: privileges,
		RoleID: fmt.Sprintf("talos-%s-%s", c.Name, consumer), UserID: fmt.Sprintf("talos-%s-%s@pve", c.Name, consumer),
		TokenName: consumer, SecretName: "talos-proxmox-" + consumer,
	}

	switch {
	case !tokenRotationRe.MatchString(rotation):
		p.errorf(input+".tokenRotation", "must be printable ASCII (any value: a new one makes a new token), e.g. a date such as \"2026-11\"")
	case rotation != "":
		sum := sha256.Sum256([]byte(rotation))
		t.TokenName += "-" + hex.EncodeToString(sum[:4])
	}

	// PVE: a user id is at most 64 characters with its realm.
	if len(t.UserID) > 64 {
		p.errorf(input, "the Proxmox user the component makes for it, %q, is longer than the 64 characters Proxmox allows; "+
			"use a clusterName of at most %d characters", t.UserID, 64-len(t.UserID)+len(c.Name))
	}

	return t
}

// csiStorages checks the storage classes and returns their datastores, each once, in order, with
// the property of each that names it first.
func csiStorages(p *problems, classes []StorageClassInput) (storages, inputs []string) {
	if len(classes) == 0 {
		p.errorf("proxmoxCsi.storageClasses", "needs at least one entry: {name, storage} with the Proxmox datastore "+
			"(holding `images` content) its volumes live on, e.g. {name: \"proxmox-data\", storage: \"local-lvm\"}")
	}

	var (
		defaults int
		seen     = map[string]bool{}
	)

	for i, sc := range classes {
		at := fmt.Sprintf("proxmoxCsi.storageClasses[%d]", i)

		switch {
		case !isDNSSubdomain(sc.Name):
			p.errorf(at+".name", "%q is not a StorageClass name; use lower-case letters, digits, '-' and '.', e.g. \"proxmox-data\"", sc.Name)
		case seen[sc.Name]:
			p.errorf(at+".name", "%q is used by another storage class; names must be unique", sc.Name)
		}

		seen[sc.Name] = true

		if sc.Storage == "" {
			p.errorf(at+".storage", "is required: the Proxmox datastore (with `images` content) the class's volumes live on, e.g. \"local-lvm\"")
		} else if !slices.Contains(storages, sc.Storage) {
			storages = append(storages, sc.Storage)
			inputs = append(inputs, at+".storage")
		}

		if sc.ReclaimPolicy != "" && !slices.Contains(reclaimPolicies, sc.ReclaimPolicy) {
			p.errorf(at+".reclaimPolicy", "%q is not a reclaim policy; use Delete (the default) or Retain", sc.ReclaimPolicy)
		}

		if sc.FSType != "" && !slices.Contains(fsTypes, sc.FSType) {
			p.errorf(at+".fsType", "%q is not a file system the plugin formats; use ext4 (the default) or xfs", sc.FSType)
		}

		if sc.Default != nil && *sc.Default {
			defaults++
			if defaults == 2 {
				p.errorf(at+".default", "only one storage class can be the cluster's default")
			}
		}
	}

	return storages, inputs
}

// storageClassValues are the chart's storageClass values for the classes.
func storageClassValues(classes []StorageClassInput) []any {
	out := make([]any, 0, len(classes))

	for _, sc := range classes {
		v := map[string]any{
			"name": sc.Name, "storage": sc.Storage,
			"reclaimPolicy": firstString(sc.ReclaimPolicy, "Delete"), "fstype": firstString(sc.FSType, "ext4"),
		}
		if sc.Default != nil && *sc.Default {
			v["annotations"] = map[string]any{"storageclass.kubernetes.io/is-default-class": "true"}
		}

		out = append(out, v)
	}

	return out
}

// VMIDOf is node n's VM id: the one it pins, else the one assigned to it; 0 when Proxmox chooses.
func (c *Cluster) VMIDOf(n Node) int {
	if n.VMID != 0 {
		return n.VMID
	}

	return c.AssignedVMIDs[n.Name]
}

// ProviderID is the provider ID the Proxmox CCM gives node n's Node (its default provider:
// proxmox://<region>/<vmid>), which the kubelet registers with; "" when the VM id is not known
// yet (the CCM then finds the VM by the node's name).
func (c *Cluster) ProviderID(n Node) string {
	id := c.VMIDOf(n)
	if id == 0 {
		return ""
	}

	return fmt.Sprintf("proxmox://%s/%d", c.ProxmoxClusterName, id)
}
