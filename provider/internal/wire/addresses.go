package wire

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/talosconfig"
)

// Addresses are every node's address, by name: plain strings with static addressing, what the
// node's address search found with DHCP.
type Addresses map[string]pulumi.StringOutput

// Of returns the addresses of nodes, in order.
func (a Addresses) Of(nodes []spec.Node) pulumi.StringArrayOutput {
	var arr pulumi.StringArray
	for _, n := range nodes {
		arr = append(arr, a[n.Name])
	}

	if arr == nil {
		return pulumi.ToStringArray([]string{}).ToStringArrayOutput()
	}

	return arr.ToStringArrayOutput()
}

// EndpointHost is the API endpoint host: the cluster's endpoint, else the bootstrap node's
// address (known up front unless it is the first control plane of a DHCP cluster).
func (a Addresses) EndpointHost(c *spec.Cluster) pulumi.StringOutput {
	if c.Endpoint != "" {
		return pulumi.String(c.Endpoint).ToStringOutput()
	}

	return a[c.BootstrapNode().Name]
}

// EndpointURL is the Kubernetes API URL, https://<EndpointHost>:6443.
func (a Addresses) EndpointURL(c *spec.Cluster) pulumi.StringOutput {
	return a.EndpointHost(c).ApplyT(talosconfig.ClusterEndpoint).(pulumi.StringOutput)
}

// nodePatch is the component's patch for a node, once the addresses it needs are known.
func (a Addresses) nodePatch(c *spec.Cluster, n spec.Node, contract pulumi.StringOutput) pulumi.StringOutput {
	return pulumi.All(a[n.Name], a.Of(c.ControlPlanes()), a.EndpointHost(c), contract).ApplyT(
		func(v []any) (string, error) {
			return talosconfig.NodePatch(c, n, talosconfig.Addresses{
				NodeIP: v[0].(string), ControlPlaneIPs: v[1].([]string), Endpoint: v[2].(string),
			}, v[3].(string))
		}).(pulumi.StringOutput)
}
