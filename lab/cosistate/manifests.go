package cosistate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/argsbuilder"
	"github.com/siderolabs/talos/pkg/images"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/config/config"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
)

// BootstrapManifestsFromConfig derives k8s.BootstrapManifestsConfig from a control plane's
// configuration as machined's ControlPlaneBootstrapManifestsController does (Talos v1.13.9,
// internal/app/machined/pkg/controllers/k8s/control_plane.go). It returns nil for a
// configuration without cluster or machine section and for a worker, which have none.
func BootstrapManifestsFromConfig(cfg talosconfig.Config) (*k8s.BootstrapManifestsConfigSpec, error) {
	if cfg == nil || cfg.Cluster() == nil || cfg.Machine() == nil || !cfg.Machine().Type().IsControlPlane() {
		return nil, nil //nolint:nilnil // no such resource on that node
	}

	dnsServiceIPs, err := cfg.Cluster().Network().DNSServiceIPs()
	if err != nil {
		return nil, fmt.Errorf("cosistate: calculating DNS service IPs: %w", err)
	}

	var dnsServiceIP, dnsServiceIPv6 string

	for _, ip := range dnsServiceIPs {
		if dnsServiceIP == "" && ip.Is4() {
			dnsServiceIP = ip.String()
		}

		if dnsServiceIPv6 == "" && ip.Is6() {
			dnsServiceIPv6 = ip.String()
		}
	}

	imgs := images.List(cfg)

	proxyArgs, err := kubeProxyArgs(cfg)
	if err != nil {
		return nil, err
	}

	var server, flannelHost, flannelPort string

	if kp := cfg.Machine().Features().KubePrism(); kp.Enabled() {
		server = fmt.Sprintf("https://127.0.0.1:%d", kp.Port())
		flannelHost = "127.0.0.1"
		flannelPort = strconv.Itoa(kp.Port())
	} else {
		server = cfg.Cluster().Endpoint().String()
	}

	network := cfg.Cluster().Network()

	return &k8s.BootstrapManifestsConfigSpec{
		Server:        server,
		ClusterDomain: network.DNSDomain(),

		PodCIDRs: network.PodCIDRs(),

		ProxyEnabled: cfg.Cluster().Proxy().Enabled(),
		ProxyImage:   cfg.Cluster().Proxy().Image(),
		ProxyArgs:    proxyArgs,

		CoreDNSEnabled: cfg.Cluster().CoreDNS().Enabled(),
		CoreDNSImage:   cfg.Cluster().CoreDNS().Image(),

		DNSServiceIP:   dnsServiceIP,
		DNSServiceIPv6: dnsServiceIPv6,

		FlannelEnabled:                    network.CNI().Name() == constants.FlannelCNI,
		FlannelImage:                      imgs.Flannel.String(),
		FlannelExtraArgs:                  network.CNI().Flannel().ExtraArgs(),
		FlannelKubeServiceHost:            flannelHost,
		FlannelKubeServicePort:            flannelPort,
		FlannelKubeNetworkPoliciesEnabled: network.CNI().Flannel().KubeNetworkPoliciesEnabled(),
		FlannelKubeNetworkPoliciesImage:   imgs.KubeNetworkPolicies.String(),

		TalosAPIServiceEnabled: cfg.Machine().Features().KubernetesTalosAPIAccess().Enabled(),

		CNIName: network.CNI().Name(),
	}, nil
}

// kubeProxyArgs are kube-proxy's arguments as machined's getProxyArgs builds them.
func kubeProxyArgs(cfg talosconfig.Config) ([]string, error) {
	mode := cfg.Cluster().Proxy().Mode()
	if mode == "" {
		// nftables from Kubernetes 1.31 on, judged by the kube-proxy image's tag
		mode = "iptables"
		if imageAtLeast(cfg.Cluster().Proxy().Image(), 1, 31) {
			mode = "nftables"
		}
	}

	builder := argsbuilder.Args{
		"cluster-cidr":           {strings.Join(cfg.Cluster().Network().PodCIDRs(), ",")},
		"hostname-override":      {"$(NODE_NAME)"},
		"kubeconfig":             {"/etc/kubernetes/kubeconfig"},
		"proxy-mode":             {mode},
		"conntrack-max-per-core": {"0"},
	}

	policies := argsbuilder.MergePolicies{"kubeconfig": argsbuilder.MergeDenied}

	if err := builder.Merge(cfg.Cluster().Proxy().ExtraArgs(), argsbuilder.WithMergePolicies(policies)); err != nil {
		return nil, fmt.Errorf("cosistate: kube-proxy arguments: %w", err)
	}

	return builder.Args(), nil
}

// imageAtLeast reports whether image's tag is a version ≥ major.minor, like Talos'
// kubernetes.VersionGTE (pre-releases count as their version; untagged or unparsable: false).
func imageAtLeast(image string, major, minor int) bool {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}

	i := strings.LastIndex(image, ":")
	if i < 0 || i < strings.LastIndex(image, "/") {
		return false
	}

	maj, minr, err := parseMajorMinor(image[i+1:])
	if err != nil {
		return false
	}

	return maj > major || (maj == major && minr >= minor)
}

func parseMajorMinor(tag string) (int, int, error) {
	parts := strings.SplitN(strings.TrimPrefix(tag, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, errors.New("not a version")
	}

	maj, err := strconv.Atoi(parts[0])
	if err != nil {
		return 0, 0, fmt.Errorf("major: %w", err)
	}

	minr, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0, 0, fmt.Errorf("minor: %w", err)
	}

	return maj, minr, nil
}
