package talosmanifests

import (
	"net/netip"
	"slices"

	"github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/config/types/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
)

// Facts are what a control plane's configuration says about the Kubernetes add-ons Talos deploys
// and the cluster network. Since machinery v1.14 they live either in the v1alpha1 document
// (contracts up to 1.13, what the lab's nodes run) or in Kube* documents (contract 1.14); Facts
// reads them through the machinery's K8s* accessors, which answer for both.
type Facts struct {
	// CNI is the CNI as Talos v1.13 names it: constants.FlannelCNI, CustomCNI or NoneCNI.
	CNI string
	// External are the manifests fetched by URL, in order: a custom CNI's first, then the extra
	// manifests (and, with contract 1.14, the KubeExternalManifestConfig documents).
	External []ExternalManifest
	// Inline are the inline manifests, in order.
	Inline []InlineManifest

	ProxyEnabled, CoreDNSEnabled bool
	ProxyImage, CoreDNSImage     string

	PodCIDRs, ServiceCIDRs []string
	DNSDomain              string
	// DNSServiceIP is the kube-dns service address: the 10th address of the first service CIDR.
	DNSServiceIP string
}

// ExternalManifest is a manifest fetched from URL with Headers. Name is what Talos names it: the
// URL for the v1alpha1 document's, the document name for a KubeExternalManifestConfig.
type ExternalManifest struct {
	Name, URL string
	Headers   map[string]string
}

// InlineManifest is a manifest given in the configuration.
type InlineManifest struct {
	Name, Contents string
}

// FactsOf reads the facts of cfg.
func FactsOf(cfg config.Config) Facts {
	var f Facts

	network := cfg.K8sNetworkConfig()
	if network == nil {
		// Neither cluster.network nor a KubeNetworkConfig: Talos up to v1.13 used its defaults
		// (Flannel, 10.244.0.0/16, 10.96.0.0/12, cluster.local), which an empty v1alpha1 cluster
		// section answers with. Machinery v1.14 leaves the network unset instead.
		network = &v1alpha1.ClusterConfig{}
	}

	f.PodCIDRs = prefixes(network.PodCIDRs())
	f.ServiceCIDRs = prefixes(network.ServiceCIDRs())
	f.DNSDomain = network.DNSDomain()

	if ips := k8s.DNSServiceAddrs(network.ServiceCIDRs()); len(ips) > 0 {
		f.DNSServiceIP = ips[0].String()
	}

	var cniURLs []string

	// Machinery v1.14 has no CNI name any more: Flannel is a KubeFlannelCNIConfig (the accessor
	// also answers for cluster.network.cni.name flannel), a custom CNI an external manifest. The
	// legacy cluster.network, which the accessor hands back as the v1alpha1 cluster section, still
	// names the CNI, and the lab keeps that name where Talos v1.13 published it.
	switch legacy, ok := network.(*v1alpha1.ClusterConfig); {
	case ok:
		f.CNI, cniURLs = legacy.CNI().Name(), legacy.CNI().URLs()
	case cfg.K8sFlannelCNIConfig() != nil:
		f.CNI = constants.FlannelCNI
	default:
		f.CNI = constants.NoneCNI
	}

	f.External = external(cfg.K8sExternalManifestConfigs(), f.CNI, cniURLs)

	for _, m := range cfg.K8sInlineManifestConfigs() {
		f.Inline = append(f.Inline, InlineManifest{Name: m.Name(), Contents: m.Contents()})
	}

	if proxy := cfg.K8sProxyConfig(); proxy != nil {
		f.ProxyEnabled, f.ProxyImage = proxy.Enabled(), proxy.Image()
	}

	if dns := cfg.K8sCoreDNSConfig(); dns != nil {
		f.CoreDNSEnabled, f.CoreDNSImage = dns.Enabled(), dns.Image()
	}

	return f
}

// external orders the external manifests as Talos v1.13 applied them. Machinery v1.14 lists
// cluster.network.cni.urls last, after cluster.extraManifests (with the extra manifests' headers);
// Talos v1.13 applied a custom CNI's manifests first and ignored the URLs of any other CNI.
func external(all []config.K8sExternalManifestConfig, cni string, cniURLs []string) []ExternalManifest {
	all = slices.Clone(all)

	var first []ExternalManifest

	// The CNI's entries are the last ones; an extra manifest may list the same URL.
	tail := len(all) - len(cniURLs)
	for i, u := range cniURLs {
		if tail < 0 || all[tail+i].URL() != u {
			tail = -1 // not the layout described above: leave the list as the machinery gives it

			break
		}
	}

	if tail >= 0 {
		for _, m := range all[tail:] {
			if cni == constants.CustomCNI {
				first = append(first, ExternalManifest{Name: m.Name(), URL: m.URL(), Headers: m.Headers()})
			}
		}

		all = all[:tail]
	}

	out := first
	for _, m := range all {
		out = append(out, ExternalManifest{Name: m.Name(), URL: m.URL(), Headers: m.Headers()})
	}

	return out
}

func prefixes(p []netip.Prefix) []string {
	out := make([]string, 0, len(p))
	for _, x := range p {
		out = append(out, x.String())
	}

	return out
}
