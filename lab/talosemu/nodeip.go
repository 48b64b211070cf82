package talosemu

import (
	"net/netip"
	"slices"

	sidnet "github.com/siderolabs/net"
	"github.com/siderolabs/talos/pkg/machinery/config/config"
)

// Which of a node's addresses Kubernetes and etcd use, as Talos picks them.

// kubeletNodeIPs is Talos' NodeIPController (the kubelet's --node-ip): the node's addresses in
// machine.kubelet.nodeIP.validSubnets (by default, when none are set, every address of each
// family the service subnets have: 0.0.0.0/0 and ::/0 in their order), not in the pod or service
// subnets nor a VIP, the first of each family, in the subnets' order. None: Talos logs "no
// suitable node IP found" and the kubelet never starts.
func kubeletNodeIPs(cfg config.Config, addrs []netip.Addr) []netip.Addr {
	var valid, exclude []string

	if n := cfg.K8sNodeConfig(); n != nil && n.NodeIP() != nil {
		valid = n.NodeIP().ValidSubnets()
	}

	if k := cfg.K8sNetworkConfig(); k != nil {
		if len(valid) == 0 {
			for _, p := range k.ServiceCIDRs() {
				if p.Addr().Is6() {
					valid = append(valid, "::/0")
				} else {
					valid = append(valid, "0.0.0.0/0")
				}
			}
		}

		for _, p := range slices.Concat(k.PodCIDRs(), k.ServiceCIDRs()) {
			exclude = append(exclude, "!"+p.String())
		}
	}

	if len(valid) == 0 {
		valid = []string{"0.0.0.0/0"}
	}

	for _, vip := range declaredVIPs(cfg) {
		exclude = append(exclude, "!"+vip.String())
	}

	ips, err := sidnet.FilterIPs(addrs, slices.Concat(valid, exclude))
	if err != nil {
		return nil
	}

	var out []netip.Addr

	for _, ip := range ips {
		if !slices.ContainsFunc(out, func(o netip.Addr) bool { return o.Is4() == ip.Is4() }) {
			out = append(out, ip)
		}
	}

	return out
}

// etcdAdvertisedIP is the address Talos' etcd advertises: the first of the node's addresses in
// cluster.etcd.advertisedSubnets (not a VIP), else its first address; invalid when none fits.
func etcdAdvertisedIP(cfg config.Config, addrs []netip.Addr) netip.Addr {
	valid := []string{"0.0.0.0/0", "::/0"}

	if cfg.Cluster() != nil && cfg.Cluster().Etcd() != nil && len(cfg.Cluster().Etcd().AdvertisedSubnets()) > 0 {
		valid = cfg.Cluster().Etcd().AdvertisedSubnets()
	}

	for _, vip := range declaredVIPs(cfg) {
		valid = append(valid, "!"+vip.String())
	}

	ips, err := sidnet.FilterIPs(addrs, valid)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}
	}

	return ips[0]
}

// declaredVIPs are the VIPs the configuration declares (v1alpha1 interfaces' vip, VIP documents).
func declaredVIPs(cfg config.Config) []netip.Addr {
	var out []netip.Addr

	if cfg.Machine() != nil {
		for _, d := range cfg.Machine().Network().Devices() {
			if d.VIPConfig() != nil {
				if ip, err := netip.ParseAddr(d.VIPConfig().IP()); err == nil {
					out = append(out, ip)
				}
			}
		}
	}

	for _, v := range cfg.NetworkVirtualIPConfigs() {
		out = append(out, v.VIP())
	}

	return out
}

// endpointVIP is the VIP the cluster endpoint names, if the configuration declares it as one.
func endpointVIP(cfg config.Config) netip.Addr {
	u := clusterEndpoint(cfg)
	if u == nil {
		return netip.Addr{}
	}

	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil || !slices.Contains(declaredVIPs(cfg), ip) {
		return netip.Addr{}
	}

	return ip
}
