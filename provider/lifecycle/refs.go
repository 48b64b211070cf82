package lifecycle

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// This file is the seam between the resources and the component that registers them: per
// resource, its type token, its inputs as Pulumi inputs (one field per input property of its
// Args, tagged with the property's name, with the embedded heads embedded the same way), the view
// of its outputs (one field per property of its State), and a Kind that registers it. The tests
// check the tags against the properties infer serves, so a renamed or added argument fails there
// instead of at `pulumi up`.

// tokenPrefix is how infer names the resources of this Go package: the plugin's package name
// (the component provider's Name), then the module, the last element of the package path.
const tokenPrefix = "talos-proxmox:lifecycle:"

// The resources' type tokens, as the plugin serves them.
const (
	// NodeUpgradeToken is NodeUpgrade's type token.
	NodeUpgradeToken = tokenPrefix + "NodeUpgrade"
	// ClusterHealthToken is ClusterHealth's type token.
	ClusterHealthToken = tokenPrefix + "ClusterHealth"
	// MembershipToken is Membership's type token.
	MembershipToken = tokenPrefix + "Membership"
	// ManifestSyncToken is ManifestSync's type token.
	ManifestSyncToken = tokenPrefix + "ManifestSync"
	// NodeRetireToken is NodeRetire's type token.
	NodeRetireToken = tokenPrefix + "NodeRetire"
	// KubernetesUpgradeToken is KubernetesUpgrade's type token.
	KubernetesUpgradeToken = tokenPrefix + "KubernetesUpgrade"
	// NodeConfigToken is NodeConfig's type token.
	NodeConfigToken = tokenPrefix + "NodeConfig"
	// NodeAddressToken is NodeAddress's type token.
	NodeAddressToken = tokenPrefix + "NodeAddress"
	// ClientCredentialsToken is ClientCredentials's type token.
	ClientCredentialsToken = tokenPrefix + "ClientCredentials"
)

// Kind is one resource as the component registers it: its type token, the struct of its inputs
// (I) and the view of its outputs (O, registered through P = *O).
type Kind[I, O any, P interface {
	*O
	pulumi.CustomResource
}] struct {
	// Token is the resource's type token.
	Token string
	// args is the resource's Args: Register refuses inputs that leave a required one out.
	args reflect.Type
}

// kindOf is the Kind of the resource with Args A, type token token, inputs I and outputs O.
func kindOf[A, I, O any, P interface {
	*O
	pulumi.CustomResource
}](token string) Kind[I, O, P] {
	return Kind[I, O, P]{Token: token, args: reflect.TypeFor[A]()}
}

// Register registers a resource of kind k named name with inputs in, and returns the view of its
// outputs. Nil inputs are left out; leaving out an input the resource requires is an error.
func (k Kind[I, O, P]) Register(ctx *pulumi.Context, name string, in I, opts ...pulumi.ResourceOption) (P, error) {
	props, err := inputMap(reflect.ValueOf(in))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", k.Token, name, err)
	}

	for _, f := range reflect.VisibleFields(k.args) {
		if prop, optional, ok := tagOf(f); ok && !optional && props[prop] == nil {
			return nil, fmt.Errorf("%s %s: the input %s is required", k.Token, name, prop)
		}
	}

	out := P(new(O))
	if err := ctx.RegisterResource(k.Token, name, props, out, opts...); err != nil {
		return nil, err
	}

	return out, nil
}

// tagOf reads a field's `pulumi` tag: the property's name and whether it is optional. ok is false
// for a field with no tag (an embedded struct, whose fields are the properties).
func tagOf(f reflect.StructField) (name string, optional, ok bool) {
	tag, ok := f.Tag.Lookup("pulumi")
	if !ok || !f.IsExported() {
		return "", false, false
	}

	name, opts, _ := strings.Cut(tag, ",")

	return name, slices.Contains(strings.Split(opts, ","), "optional"), true
}

// inputMap is an inputs struct as the property map Pulumi registers: its fields, those of
// embedded structs included, by their `pulumi` tags, without the nil ones. (The SDK's own
// marshalling of an Input struct does not flatten embedded structs.)
func inputMap(v reflect.Value) (pulumi.Map, error) {
	m := pulumi.Map{}

	for _, f := range reflect.VisibleFields(v.Type()) {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue // its fields follow, promoted
		}

		name, _, ok := tagOf(f)
		if !ok {
			return nil, fmt.Errorf("%s.%s has no pulumi tag", v.Type(), f.Name)
		}

		in, err := toInput(v.FieldByIndex(f.Index))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}

		if in != nil {
			m[name] = in
		}
	}

	return m, nil
}

// toInput is one field's value as a Pulumi input: an input as it is, a struct or a map of them as
// a pulumi.Map; nil when it is nil.
func toInput(v reflect.Value) (pulumi.Input, error) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
	}

	if in, ok := v.Interface().(pulumi.Input); ok {
		return in, nil
	}

	switch {
	case v.Kind() == reflect.Struct:
		return inputMap(v)
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		m := pulumi.Map{}

		for it := v.MapRange(); it.Next(); {
			in, err := toInput(it.Value())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", it.Key(), err)
			}

			if in != nil {
				m[it.Key().String()] = in
			}
		}

		return m, nil
	default:
		return nil, fmt.Errorf("%s is not a Pulumi input", v.Type())
	}
}

// ClusterAccessInputs are ClusterAccess's inputs.
type ClusterAccessInputs struct {
	// Talosconfig is the Talos client configuration of the cluster.
	Talosconfig pulumi.StringInput `pulumi:"talosconfig"`
	// Kubeconfig is the admin kubeconfig of the cluster.
	Kubeconfig pulumi.StringInput `pulumi:"kubeconfig"`
}

// NodeRefInputs are NodeRef's inputs.
type NodeRefInputs struct {
	// Node is the node's hostname.
	Node pulumi.StringInput `pulumi:"node"`
	// Address is the node's IP address.
	Address pulumi.StringInput `pulumi:"address"`
	// ControlPlane tells whether the node is a control plane.
	ControlPlane pulumi.BoolInput `pulumi:"controlPlane"`
}

// NodeUpgradeInputs are NodeUpgradeArgs as Pulumi inputs.
type NodeUpgradeInputs struct {
	ClusterAccessInputs
	NodeRefInputs
	// ControlPlanes are every control plane of the cluster, hostname to IP.
	ControlPlanes pulumi.StringMapInput `pulumi:"controlPlanes"`
	// TalosVersion is the Talos version the node must run.
	TalosVersion pulumi.StringInput `pulumi:"talosVersion"`
	// SchematicId is the Image Factory schematic id the node's image must carry.
	SchematicId pulumi.StringInput `pulumi:"schematicId"`
	// InstallerImage is the installer image that brings the node there.
	InstallerImage pulumi.StringInput `pulumi:"installerImage"`
	// Drain cordons and drains the node before its reboot.
	Drain pulumi.BoolInput `pulumi:"drain"`
	// DrainTimeout is how long the drain may take (a duration).
	DrainTimeout pulumi.StringInput `pulumi:"drainTimeout"`
	// Timeout is how long each wait may take (a duration).
	Timeout pulumi.StringInput `pulumi:"timeout"`
	// CheckReady requires the Kubernetes Node to be Ready before and after.
	CheckReady pulumi.BoolInput `pulumi:"checkReady"`
	// AllowDowngrade allows an older version.
	AllowDowngrade pulumi.BoolInput `pulumi:"allowDowngrade"`
}

// NodeUpgradeOutputs is the view of a NodeUpgrade's outputs (NodeUpgradeState).
type NodeUpgradeOutputs struct {
	pulumi.CustomResourceState

	// Talosconfig is the talosconfig input.
	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
	// Kubeconfig is the kubeconfig input.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// Node is the node input.
	Node pulumi.StringOutput `pulumi:"node"`
	// Address is the address input.
	Address pulumi.StringOutput `pulumi:"address"`
	// ControlPlane is the controlPlane input.
	ControlPlane pulumi.BoolOutput `pulumi:"controlPlane"`
	// ControlPlanes is the controlPlanes input.
	ControlPlanes pulumi.StringMapOutput `pulumi:"controlPlanes"`
	// TalosVersion is the talosVersion input.
	TalosVersion pulumi.StringOutput `pulumi:"talosVersion"`
	// SchematicId is the schematicId input.
	SchematicId pulumi.StringOutput `pulumi:"schematicId"`
	// InstallerImage is the installerImage input.
	InstallerImage pulumi.StringOutput `pulumi:"installerImage"`
	// Drain is the drain input.
	Drain pulumi.BoolOutput `pulumi:"drain"`
	// DrainTimeout is the drainTimeout input.
	DrainTimeout pulumi.StringOutput `pulumi:"drainTimeout"`
	// Timeout is the timeout input.
	Timeout pulumi.StringOutput `pulumi:"timeout"`
	// CheckReady is the checkReady input.
	CheckReady pulumi.BoolOutput `pulumi:"checkReady"`
	// AllowDowngrade is the allowDowngrade input.
	AllowDowngrade pulumi.BoolOutput `pulumi:"allowDowngrade"`
	// RunningVersion is the Talos version the node reported after the last change.
	RunningVersion pulumi.StringOutput `pulumi:"runningVersion"`
	// RunningSchematicId is the schematic id the node reported after the last change.
	RunningSchematicId pulumi.StringOutput `pulumi:"runningSchematicId"`
	// BootId is the node's boot id after the last change.
	BootId pulumi.StringOutput `pulumi:"bootId"`
}

// NodeUpgradeKind registers NodeUpgrades.
var NodeUpgradeKind = kindOf[NodeUpgradeArgs, NodeUpgradeInputs, NodeUpgradeOutputs](NodeUpgradeToken)

// ClusterHealthInputs are ClusterHealthArgs as Pulumi inputs.
type ClusterHealthInputs struct {
	ClusterAccessInputs
	// ControlPlanes are the control planes, hostname to IP.
	ControlPlanes pulumi.StringMapInput `pulumi:"controlPlanes"`
	// Workers are the workers, hostname to IP.
	Workers pulumi.StringMapInput `pulumi:"workers"`
	// RequireNodesReady requires every Kubernetes Node to be Ready.
	RequireNodesReady pulumi.BoolInput `pulumi:"requireNodesReady"`
	// Timeout is how long to wait (a duration).
	Timeout pulumi.StringInput `pulumi:"timeout"`
	// Revision changes whenever the cluster does, so the gate runs again.
	Revision pulumi.StringInput `pulumi:"revision"`
	// KubernetesVersion is the cluster's Kubernetes version (optional).
	KubernetesVersion pulumi.StringInput `pulumi:"kubernetesVersion"`
}

// ClusterHealthOutputs is the view of a ClusterHealth's outputs (ClusterHealthState).
type ClusterHealthOutputs struct {
	pulumi.CustomResourceState

	// Talosconfig is the talosconfig input, once the cluster passed the gate.
	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
	// Kubeconfig is the kubeconfig input, once the cluster passed the gate.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// ControlPlanes is the controlPlanes input.
	ControlPlanes pulumi.StringMapOutput `pulumi:"controlPlanes"`
	// Workers is the workers input.
	Workers pulumi.StringMapOutput `pulumi:"workers"`
	// RequireNodesReady is the requireNodesReady input.
	RequireNodesReady pulumi.BoolOutput `pulumi:"requireNodesReady"`
	// Timeout is the timeout input.
	Timeout pulumi.StringOutput `pulumi:"timeout"`
	// Revision is the revision input.
	Revision pulumi.StringOutput `pulumi:"revision"`
	// KubernetesVersion is the kubernetesVersion input.
	KubernetesVersion pulumi.StringOutput `pulumi:"kubernetesVersion"`
}

// ClusterHealthKind registers ClusterHealths.
var ClusterHealthKind = kindOf[ClusterHealthArgs, ClusterHealthInputs, ClusterHealthOutputs](ClusterHealthToken)

// MemberNodeInputs are MemberNode as Pulumi inputs.
type MemberNodeInputs struct {
	// Address is the node's IP address.
	Address pulumi.StringInput `pulumi:"address"`
	// ControlPlane tells whether the node is a control plane.
	ControlPlane pulumi.BoolInput `pulumi:"controlPlane"`
}

// MembershipInputs are MembershipArgs as Pulumi inputs.
type MembershipInputs struct {
	ClusterAccessInputs
	// Nodes are the cluster's nodes by hostname.
	Nodes map[string]MemberNodeInputs `pulumi:"nodes"`
	// DrainTimeout is how long draining a leaving worker may take (a duration).
	DrainTimeout pulumi.StringInput `pulumi:"drainTimeout"`
	// Timeout is how long each wait may take (a duration).
	Timeout pulumi.StringInput `pulumi:"timeout"`
}

// MembershipOutputs is the view of a Membership's outputs (MembershipState).
type MembershipOutputs struct {
	pulumi.CustomResourceState

	// Talosconfig is the talosconfig input.
	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
	// Kubeconfig is the kubeconfig input.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// Nodes is the nodes input: hostname to {address, controlPlane}.
	Nodes pulumi.MapMapOutput `pulumi:"nodes"`
	// DrainTimeout is the drainTimeout input.
	DrainTimeout pulumi.StringOutput `pulumi:"drainTimeout"`
	// Timeout is the timeout input.
	Timeout pulumi.StringOutput `pulumi:"timeout"`
}

// MembershipKind registers Memberships.
var MembershipKind = kindOf[MembershipArgs, MembershipInputs, MembershipOutputs](MembershipToken)

// ManifestSyncInputs are ManifestSyncArgs as Pulumi inputs.
type ManifestSyncInputs struct {
	// Kubeconfig is the admin kubeconfig of the cluster.
	Kubeconfig pulumi.StringInput `pulumi:"kubeconfig"`
	// Manifests are the manifests by name.
	Manifests pulumi.StringMapInput `pulumi:"manifests"`
	// ExtraManifests are URLs of extra manifests (optional).
	ExtraManifests pulumi.StringArrayInput `pulumi:"extraManifests"`
	// Namespaces map an extra manifest URL to the namespace of its namespaced objects that name
	// none (optional).
	Namespaces pulumi.StringMapInput `pulumi:"namespaces"`
	// PruneCrdsAndNamespaces also deletes CustomResourceDefinitions and Namespaces that left the
	// configuration (optional).
	PruneCrdsAndNamespaces pulumi.BoolInput `pulumi:"pruneCrdsAndNamespaces"`
	// Force deletes and recreates objects whose immutable fields changed (optional).
	Force pulumi.BoolInput `pulumi:"force"`
	// Timeout is how long a sync may take (a duration).
	Timeout pulumi.StringInput `pulumi:"timeout"`
}

// ManifestSyncOutputs is the view of a ManifestSync's outputs (ManifestSyncState).
type ManifestSyncOutputs struct {
	pulumi.CustomResourceState

	// Kubeconfig is the kubeconfig input.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// Manifests is the manifests input.
	Manifests pulumi.StringMapOutput `pulumi:"manifests"`
	// ExtraManifests is the extraManifests input.
	ExtraManifests pulumi.StringArrayOutput `pulumi:"extraManifests"`
	// Namespaces is the namespaces input.
	Namespaces pulumi.StringMapOutput `pulumi:"namespaces"`
	// PruneCrdsAndNamespaces is the pruneCrdsAndNamespaces input.
	PruneCrdsAndNamespaces pulumi.BoolOutput `pulumi:"pruneCrdsAndNamespaces"`
	// Force is the force input.
	Force pulumi.BoolOutput `pulumi:"force"`
	// Timeout is the timeout input.
	Timeout pulumi.StringOutput `pulumi:"timeout"`
	// Applied is what the last sync applied: manifest → object → sha256.
	Applied pulumi.StringMapMapOutput `pulumi:"applied"`
	// Changes are, per manifest, the objects the last sync added, changed and pruned.
	Changes pulumi.StringArrayOutput `pulumi:"changes"`
}

// ManifestSyncKind registers ManifestSyncs.
var ManifestSyncKind = kindOf[ManifestSyncArgs, ManifestSyncInputs, ManifestSyncOutputs](ManifestSyncToken)

// NodeRetireInputs are NodeRetireArgs as Pulumi inputs.
type NodeRetireInputs struct {
	ClusterAccessInputs
	NodeRefInputs
	// DrainTimeout is how long draining the node may take (a duration).
	DrainTimeout pulumi.StringInput `pulumi:"drainTimeout"`
	// Timeout is how long each wait may take (a duration).
	Timeout pulumi.StringInput `pulumi:"timeout"`
}

// NodeRetireOutputs is the view of a NodeRetire's outputs (NodeRetireState).
type NodeRetireOutputs struct {
	pulumi.CustomResourceState

	// Talosconfig is the talosconfig input.
	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
	// Kubeconfig is the kubeconfig input.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// Node is the node input.
	Node pulumi.StringOutput `pulumi:"node"`
	// Address is the address input.
	Address pulumi.StringOutput `pulumi:"address"`
	// ControlPlane is the controlPlane input.
	ControlPlane pulumi.BoolOutput `pulumi:"controlPlane"`
	// DrainTimeout is the drainTimeout input.
	DrainTimeout pulumi.StringOutput `pulumi:"drainTimeout"`
	// Timeout is the timeout input.
	Timeout pulumi.StringOutput `pulumi:"timeout"`
}

// NodeRetireKind registers NodeRetires.
var NodeRetireKind = kindOf[NodeRetireArgs, NodeRetireInputs, NodeRetireOutputs](NodeRetireToken)

// KubernetesUpgradeInputs are KubernetesUpgradeArgs as Pulumi inputs.
type KubernetesUpgradeInputs struct {
	ClusterAccessInputs
	// ControlPlanes are the control planes, hostname to IP.
	ControlPlanes pulumi.StringMapInput `pulumi:"controlPlanes"`
	// Workers are the workers, hostname to IP.
	Workers pulumi.StringMapInput `pulumi:"workers"`
	// KubernetesVersion is the Kubernetes version the cluster runs.
	KubernetesVersion pulumi.StringInput `pulumi:"kubernetesVersion"`
	// Timeout is how long each component on each node may take (a duration).
	Timeout pulumi.StringInput `pulumi:"timeout"`
}

// KubernetesUpgradeOutputs is the view of a KubernetesUpgrade's outputs (KubernetesUpgradeState).
type KubernetesUpgradeOutputs struct {
	pulumi.CustomResourceState

	// Talosconfig is the talosconfig input.
	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
	// Kubeconfig is the kubeconfig input.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// ControlPlanes is the controlPlanes input.
	ControlPlanes pulumi.StringMapOutput `pulumi:"controlPlanes"`
	// Workers is the workers input.
	Workers pulumi.StringMapOutput `pulumi:"workers"`
	// KubernetesVersion is the Kubernetes version the cluster runs.
	KubernetesVersion pulumi.StringOutput `pulumi:"kubernetesVersion"`
	// Timeout is the timeout input.
	Timeout pulumi.StringOutput `pulumi:"timeout"`
}

// KubernetesUpgradeKind registers KubernetesUpgrades.
var KubernetesUpgradeKind = kindOf[KubernetesUpgradeArgs, KubernetesUpgradeInputs, KubernetesUpgradeOutputs](KubernetesUpgradeToken)

// NodeConfigInputs are NodeConfigArgs as Pulumi inputs.
type NodeConfigInputs struct {
	ClusterAccessInputs
	NodeRefInputs
	// ControlPlanes are all control planes, hostname to IP.
	ControlPlanes pulumi.StringMapInput `pulumi:"controlPlanes"`
	// Configuration is the node's machine configuration.
	Configuration pulumi.StringInput `pulumi:"configuration"`
	// CheckReady requires the Node to be Ready after a reboot.
	CheckReady pulumi.BoolInput `pulumi:"checkReady"`
	// Timeout is how long each wait may take (a duration).
	Timeout pulumi.StringInput `pulumi:"timeout"`
}

// NodeConfigOutputs is the view of a NodeConfig's outputs (NodeConfigState).
type NodeConfigOutputs struct {
	pulumi.CustomResourceState

	// Talosconfig is the talosconfig input.
	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
	// Kubeconfig is the kubeconfig input.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// Node is the node input.
	Node pulumi.StringOutput `pulumi:"node"`
	// Address is the address input.
	Address pulumi.StringOutput `pulumi:"address"`
	// ControlPlane is the controlPlane input.
	ControlPlane pulumi.BoolOutput `pulumi:"controlPlane"`
	// ControlPlanes is the controlPlanes input.
	ControlPlanes pulumi.StringMapOutput `pulumi:"controlPlanes"`
	// Configuration is the configuration the node runs.
	Configuration pulumi.StringOutput `pulumi:"configuration"`
	// CheckReady is the checkReady input.
	CheckReady pulumi.BoolOutput `pulumi:"checkReady"`
	// Timeout is the timeout input.
	Timeout pulumi.StringOutput `pulumi:"timeout"`
}

// NodeConfigKind registers NodeConfigs.
var NodeConfigKind = kindOf[NodeConfigArgs, NodeConfigInputs, NodeConfigOutputs](NodeConfigToken)

// NodeAddressInputs are NodeAddressArgs as Pulumi inputs.
type NodeAddressInputs struct {
	// Node is the node's hostname.
	Node pulumi.StringInput `pulumi:"node"`
	// MacAddress is the MAC address of the VM's NIC (optional).
	MacAddress pulumi.StringInput `pulumi:"macAddress"`
	// Subnet is the node subnet to scan (CIDR).
	Subnet pulumi.StringInput `pulumi:"subnet"`
	// AgentAddress is the IPv4 address the guest agent reported, if it did (optional).
	AgentAddress pulumi.StringInput `pulumi:"agentAddress"`
	// Timeout is how long the search may take (a duration).
	Timeout pulumi.StringInput `pulumi:"timeout"`
}

// NodeAddressOutputs is the view of a NodeAddress's outputs (NodeAddressState).
type NodeAddressOutputs struct {
	pulumi.CustomResourceState

	// Node is the node input.
	Node pulumi.StringOutput `pulumi:"node"`
	// MacAddress is the macAddress input.
	MacAddress pulumi.StringOutput `pulumi:"macAddress"`
	// Subnet is the subnet input.
	Subnet pulumi.StringOutput `pulumi:"subnet"`
	// AgentAddress is the agentAddress input.
	AgentAddress pulumi.StringOutput `pulumi:"agentAddress"`
	// Timeout is the timeout input.
	Timeout pulumi.StringOutput `pulumi:"timeout"`
	// Address is the address found.
	Address pulumi.StringOutput `pulumi:"address"`
	// How is how it was found: "guest agent" or "maintenance API scan".
	How pulumi.StringOutput `pulumi:"how"`
}

// NodeAddressKind registers NodeAddresses.
var NodeAddressKind = kindOf[NodeAddressArgs, NodeAddressInputs, NodeAddressOutputs](NodeAddressToken)

// ClientCredentialsInputs are ClientCredentialsArgs as Pulumi inputs.
type ClientCredentialsInputs struct {
	// ClusterName is the cluster's name (the talosconfig context).
	ClusterName pulumi.StringInput `pulumi:"clusterName"`
	// Endpoint is the Kubernetes API URL (optional).
	Endpoint pulumi.StringInput `pulumi:"endpoint"`
	// OsCaCertificate is the Talos API CA certificate (base64 PEM).
	OsCaCertificate pulumi.StringInput `pulumi:"osCaCertificate"`
	// OsCaKey is the Talos API CA key (base64 PEM).
	OsCaKey pulumi.StringInput `pulumi:"osCaKey"`
	// KubernetesCaCertificate is the Kubernetes CA certificate (base64 PEM).
	KubernetesCaCertificate pulumi.StringInput `pulumi:"kubernetesCaCertificate"`
	// KubernetesCaKey is the Kubernetes CA key (base64 PEM).
	KubernetesCaKey pulumi.StringInput `pulumi:"kubernetesCaKey"`
	// TalosEndpoints are the talosconfig's endpoints (optional).
	TalosEndpoints pulumi.StringArrayInput `pulumi:"talosEndpoints"`
	// TalosNodes are the talosconfig's nodes (optional).
	TalosNodes pulumi.StringArrayInput `pulumi:"talosNodes"`
	// Validity is how long issued certificates are valid (a duration).
	Validity pulumi.StringInput `pulumi:"validity"`
	// RenewBefore is how long before expiry an up renews them (a duration).
	RenewBefore pulumi.StringInput `pulumi:"renewBefore"`
}

// ClientCredentialsOutputs is the view of a ClientCredentials' outputs (ClientCredentialsState).
type ClientCredentialsOutputs struct {
	pulumi.CustomResourceState

	// ClusterName is the clusterName input.
	ClusterName pulumi.StringOutput `pulumi:"clusterName"`
	// Endpoint is the endpoint input.
	Endpoint pulumi.StringOutput `pulumi:"endpoint"`
	// OsCaCertificate is the osCaCertificate input.
	OsCaCertificate pulumi.StringOutput `pulumi:"osCaCertificate"`
	// OsCaKey is the osCaKey input.
	OsCaKey pulumi.StringOutput `pulumi:"osCaKey"`
	// KubernetesCaCertificate is the kubernetesCaCertificate input.
	KubernetesCaCertificate pulumi.StringOutput `pulumi:"kubernetesCaCertificate"`
	// KubernetesCaKey is the kubernetesCaKey input.
	KubernetesCaKey pulumi.StringOutput `pulumi:"kubernetesCaKey"`
	// TalosEndpoints is the talosEndpoints input.
	TalosEndpoints pulumi.StringArrayOutput `pulumi:"talosEndpoints"`
	// TalosNodes is the talosNodes input.
	TalosNodes pulumi.StringArrayOutput `pulumi:"talosNodes"`
	// Validity is the validity input.
	Validity pulumi.StringOutput `pulumi:"validity"`
	// RenewBefore is the renewBefore input.
	RenewBefore pulumi.StringOutput `pulumi:"renewBefore"`
	// Talosconfig is the issued admin talosconfig.
	Talosconfig pulumi.StringOutput `pulumi:"talosconfig"`
	// Kubeconfig is the issued admin kubeconfig.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// NotAfter is when the first of the two client certificates expires (RFC 3339).
	NotAfter pulumi.StringOutput `pulumi:"notAfter"`
}

// ClientCredentialsKind registers ClientCredentials.
var ClientCredentialsKind = kindOf[ClientCredentialsArgs, ClientCredentialsInputs, ClientCredentialsOutputs](ClientCredentialsToken)
