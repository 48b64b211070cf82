package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"

	"sigs.k8s.io/yaml"
)

// Inventory is the fleet file: defaults shared by every cluster, and the clusters.
type Inventory struct {
	// Defaults apply to every cluster; a value a cluster sets itself wins.
	Defaults Cluster `json:"defaults"`
	// Clusters are reconciled in this order, each as its own stack.
	Clusters []Cluster `json:"clusters"`
}

// Cluster is one Talos cluster: the stack's name and the component's main inputs.
type Cluster struct {
	// Name is the cluster's name and its stack's name.
	Name              string          `json:"name,omitempty"`
	TalosVersion      string          `json:"talosVersion,omitempty"`
	KubernetesVersion string          `json:"kubernetesVersion,omitempty"`
	Vip               string          `json:"vip,omitempty"`
	Proxmox           Proxmox         `json:"proxmox"`
	Network           Network         `json:"network"`
	Image             Image           `json:"image"`
	Cilium            *Cilium         `json:"cilium,omitempty"`
	Nodes             map[string]Node `json:"nodes,omitempty"`
}

// Proxmox says which Proxmox VE API manages the cluster's VMs. The API token is never written in
// the inventory: APITokenEnv names the environment variable that holds it.
type Proxmox struct {
	// Endpoint is the API URL, e.g. https://pve1.example.com:8006/ (default: $PROXMOX_VE_ENDPOINT).
	Endpoint string `json:"endpoint,omitempty"`
	// Insecure skips the TLS certificate check (self-signed Proxmox certificates).
	Insecure *bool `json:"insecure,omitempty"`
	// APITokenEnv is the variable holding the API token (default PROXMOX_VE_API_TOKEN).
	APITokenEnv string `json:"apiTokenEnv,omitempty"`
}

// Network is the cluster's node network.
type Network struct {
	Gateway      string   `json:"gateway,omitempty"`
	PrefixLength int      `json:"prefixLength,omitempty"`
	Nameservers  []string `json:"nameservers,omitempty"`
}

// Image is where the Talos image comes from and which extensions it carries.
type Image struct {
	FactoryURL string   `json:"factoryUrl,omitempty"`
	Extensions []string `json:"extensions,omitempty"`
}

// Cilium installs Cilium as the CNI; empty fields take the component's defaults.
type Cilium struct {
	Version    string `json:"version,omitempty"`
	Repository string `json:"repository,omitempty"`
}

// Node is one VM of a cluster.
type Node struct {
	HostNode    string `json:"hostNode"`
	Role        string `json:"role"`
	IP          string `json:"ip,omitempty"`
	CPU         int    `json:"cpu,omitempty"`
	MemoryMib   int    `json:"memoryMib,omitempty"`
	DiskSizeGib int    `json:"diskSizeGib,omitempty"`
}

// dnsLabel is what a cluster name must be: it names the stack, the VMs and the Kubernetes cluster.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// LoadInventory reads an inventory file and returns its clusters with the defaults applied.
// Unknown keys, a missing or repeated cluster name and a cluster without nodes are errors, all
// reported at once; everything else is checked by the component, per cluster, when it runs.
func LoadInventory(path string) ([]Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}

	var inv Inventory
	if err := yaml.UnmarshalStrict(data, &inv); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	if inv.Defaults.Name != "" || len(inv.Defaults.Nodes) > 0 {
		return nil, fmt.Errorf("%s: defaults: name and nodes belong to a cluster, not to the defaults", path)
	}

	if len(inv.Clusters) == 0 {
		return nil, fmt.Errorf("%s: no clusters", path)
	}

	var problems []error
	seen := map[string]int{}
	clusters := make([]Cluster, 0, len(inv.Clusters))

	for i, c := range inv.Clusters {
		switch first, dup := seen[c.Name]; {
		case !dnsLabel.MatchString(c.Name):
			problems = append(problems, fmt.Errorf("clusters[%d].name: %q is not a DNS label (lower-case letters, digits and '-', at most 63)", i, c.Name))
		case dup:
			problems = append(problems, fmt.Errorf("clusters[%d].name: %q is also clusters[%d]: each cluster is its own stack", i, c.Name, first))
		default:
			seen[c.Name] = i
		}

		if len(c.Nodes) == 0 {
			problems = append(problems, fmt.Errorf("clusters[%d].nodes: a cluster needs at least one node", i))
		}

		clusters = append(clusters, c.withDefaults(inv.Defaults))
	}

	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: %w", path, errors.Join(problems...))
	}

	return clusters, nil
}

// withDefaults fills every field c leaves empty from d.
func (c Cluster) withDefaults(d Cluster) Cluster {
	c.TalosVersion = or(c.TalosVersion, d.TalosVersion)
	c.KubernetesVersion = or(c.KubernetesVersion, d.KubernetesVersion)
	c.Vip = or(c.Vip, d.Vip)

	c.Proxmox.Endpoint = or(c.Proxmox.Endpoint, d.Proxmox.Endpoint)
	c.Proxmox.APITokenEnv = or(c.Proxmox.APITokenEnv, d.Proxmox.APITokenEnv)
	if c.Proxmox.Insecure == nil {
		c.Proxmox.Insecure = d.Proxmox.Insecure
	}

	c.Network.Gateway = or(c.Network.Gateway, d.Network.Gateway)
	if c.Network.PrefixLength == 0 {
		c.Network.PrefixLength = d.Network.PrefixLength
	}
	if c.Network.Nameservers == nil {
		c.Network.Nameservers = d.Network.Nameservers
	}

	c.Image.FactoryURL = or(c.Image.FactoryURL, d.Image.FactoryURL)
	if c.Image.Extensions == nil {
		c.Image.Extensions = d.Image.Extensions
	}

	if c.Cilium == nil {
		c.Cilium = d.Cilium
	}

	return c
}

func or(v, def string) string {
	if v == "" {
		return def
	}

	return v
}
