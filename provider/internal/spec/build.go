package spec

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/imagefactory"
)

// Build validates in, applies every default and returns the cluster. The error, if any, is a
// *ValidationError listing every problem with its property path; the cluster is returned with
// it, defaults applied, so checks that need more than the input (rendering Helm charts) can still
// run on its valid parts and add their problems to the same report. An invalid cluster must
// never be deployed.
func Build(in Input) (*Cluster, error) {
	var p problems

	c := &Cluster{}
	buildCluster(&p, in, c)
	buildNetwork(&p, in, c)
	buildImage(&p, in.Image, c)
	buildNodes(&p, in, c)
	buildAddresses(&p, in, c)
	buildManifests(&p, in, c)
	buildHelm(&p, in, c)
	checkPatches(&p, "configPatches", in.ConfigPatches)
	checkPatches(&p, "controlPlaneConfigPatches", in.ControlPlaneConfigPatches)
	checkPatches(&p, "workerConfigPatches", in.WorkerConfigPatches)

	c.Warnings = p.warnings

	return c, p.err()
}

func buildCluster(p *problems, in Input, c *Cluster) {
	c.Name = in.ClusterName
	switch {
	case in.ClusterName == "":
		p.errorf("clusterName", "is required; use a DNS label such as \"homelab\"")
	case !isDNSLabel(in.ClusterName):
		p.errorf("clusterName", "%q is not a DNS label; use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit", in.ClusterName)
	}

	minor, ok := talosMinorOf(p, in.TalosVersion)
	if ok {
		c.TalosVersion = "v" + strings.TrimPrefix(in.TalosVersion, "v")
		c.TalosContract = minor
	}

	// The Kubernetes version's form is checked whatever the Talos version; its range only
	// when the Talos minor is known.
	buildKubernetesVersion(p, in.KubernetesVersion, minor, ok, c)

	c.ProxmoxClusterName = in.ProxmoxClusterName
	if c.ProxmoxClusterName == "" {
		c.ProxmoxClusterName = in.ClusterName
	} else if why := checkLabel("x", c.ProxmoxClusterName); why != "" {
		p.errorf("proxmoxClusterName", "%q becomes the topology.kubernetes.io/region label and must be a valid label value (at most 63 alphanumerics, '-', '_' or '.')", c.ProxmoxClusterName)
	}

	if in.Endpoint != "" && !isHost(in.Endpoint) {
		p.errorf("endpoint", "%q is not a host name or IP address; give the host only, e.g. \"10.0.0.10\" or \"k8s.example.com\" (the component adds https:// and :6443)", in.Endpoint)
	}
}

func talosMinorOf(p *problems, v string) (string, bool) {
	if v == "" {
		p.errorf("talosVersion", "is required; use a Talos release such as \"v1.11.5\" (supported: %s)", SupportedTalosRange)
		return "", false
	}

	m := talosVersionRe.FindStringSubmatch(v)
	if m == nil {
		p.errorf("talosVersion", "%q is not a Talos version; use the form v1.11.5 (supported: %s)", v, SupportedTalosRange)
		return "", false
	}

	minor := "v" + m[1] + "." + m[2]
	if _, ok := SupportedTalos[minor]; !ok {
		p.errorf("talosVersion", "%s is not supported; use %s (the versions whose machine configuration the pinned talos provider v0.7.1 generates and this component's patches are tested against)", v, SupportedTalosRange)
		return "", false
	}

	return minor, true
}

func buildKubernetesVersion(p *problems, v, talosMinor string, talosKnown bool, c *Cluster) {
	t := SupportedTalos[talosMinor]
	if v == "" {
		c.KubernetesVersion = t.DefaultKubernetes
		return
	}

	c.KubernetesVersion = v

	m := kubeVersionRe.FindStringSubmatch(v)
	if m == nil {
		unset := "the default of the Talos minor"
		if talosKnown {
			unset = t.DefaultKubernetes
		}

		p.errorf("kubernetesVersion", "%q is not a Kubernetes version; use the form v1.34.1, or leave it unset for %s", v, unset)

		return
	}

	if !talosKnown {
		return
	}

	minor, _ := strconv.Atoi(m[1])
	if minor < t.OldestKubernetesMinor || minor > t.NewestKubernetesMinor {
		p.errorf("kubernetesVersion", "%s is outside what Talos %s runs (v1.%d to v1.%d); pick a version in that range or leave it unset for %s",
			v, talosMinor, t.OldestKubernetesMinor, t.NewestKubernetesMinor, t.DefaultKubernetes)
		return
	}

	c.KubernetesVersion = "v" + strings.TrimPrefix(v, "v")
}

func buildNetwork(p *problems, in Input, c *Cluster) {
	n := in.Network
	out := Network{
		Gateway:        n.Gateway,
		PrefixLength:   Defaults.PrefixLength,
		Nameservers:    slices.Clone(n.Nameservers),
		NTPServers:     slices.Clone(n.NTPServers),
		DHCP:           n.DHCP != nil && *n.DHCP,
		PodSubnets:     orDefault(n.PodSubnets, Defaults.PodSubnets),
		ServiceSubnets: orDefault(n.ServiceSubnets, Defaults.ServiceSubnets),
		DNSDomain:      n.DNSDomain,
	}

	if out.DNSDomain == "" {
		out.DNSDomain = Defaults.DNSDomain
	} else if !isDNSSubdomain(out.DNSDomain) {
		p.errorf("network.dnsDomain", "%q is not a DNS domain; use e.g. \"cluster.local\"", out.DNSDomain)
	}

	if n.PrefixLength != nil {
		out.PrefixLength = *n.PrefixLength
		if out.PrefixLength < 1 || out.PrefixLength > 32 {
			p.errorf("network.prefixLength", "%d is not an IPv4 prefix length; use 1 to 32, e.g. 24 for a /24", out.PrefixLength)
		}
	}

	switch {
	case n.Gateway == "" && !out.DHCP:
		p.errorf("network.gateway", "is required with static addresses; set the default gateway of the node subnet, e.g. \"192.168.1.1\", or set network.dhcp to true")
	case n.Gateway != "":
		if _, ok := parseIPv4(n.Gateway); !ok {
			p.errorf("network.gateway", "%q is not an IPv4 address; use e.g. \"192.168.1.1\"", n.Gateway)
		}
	}

	for i, ns := range n.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			p.errorf(fmt.Sprintf("network.nameservers[%d]", i), "%q is not an IP address; Talos needs resolver addresses such as \"1.1.1.1\"", ns)
		}
	}

	for i, s := range n.NTPServers {
		if !isHost(s) {
			p.errorf(fmt.Sprintf("network.ntpServers[%d]", i), "%q is not a host name or IP address; use e.g. \"time.cloudflare.com\"", s)
		}
	}

	checkCIDRs(p, "network.podSubnets", out.PodSubnets)
	checkCIDRs(p, "network.serviceSubnets", out.ServiceSubnets)
	checkOverlaps(p, out)

	if n.VLANID != nil && (*n.VLANID < 1 || *n.VLANID > 4094) {
		p.errorf("network.vlanId", "%d is not a VLAN id; use 1 to 4094, or leave it unset for untagged traffic", *n.VLANID)
	}

	if n.Bridge != "" && !bridgeRe.MatchString(n.Bridge) {
		p.errorf("network.bridge", "%q is not a Proxmox bridge name; use e.g. \"vmbr0\"", n.Bridge)
	}

	c.Network = out
}

// checkOverlaps rejects pod and service networks that overlap the node subnet or each other:
// routing to nodes or services would break.
func checkOverlaps(p *problems, n Network) {
	gw, ok := parseIPv4(n.Gateway)
	if !ok || n.PrefixLength < 1 || n.PrefixLength > 32 {
		return
	}

	nodes := netip.PrefixFrom(gw, n.PrefixLength).Masked()

	var pods []netip.Prefix
	for i, s := range n.PodSubnets {
		if c, err := netip.ParsePrefix(s); err == nil {
			pods = append(pods, c.Masked())
			if c.Overlaps(nodes) {
				p.errorf(fmt.Sprintf("network.podSubnets[%d]", i), "%s overlaps the node subnet %s; pick a range the nodes do not use, e.g. 10.244.0.0/16", s, nodes)
			}
		}
	}

	for i, s := range n.ServiceSubnets {
		c, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}

		if c.Overlaps(nodes) {
			p.errorf(fmt.Sprintf("network.serviceSubnets[%d]", i), "%s overlaps the node subnet %s; pick a range the nodes do not use, e.g. 10.96.0.0/12", s, nodes)
		}

		for _, pod := range pods {
			if c.Overlaps(pod) {
				p.errorf(fmt.Sprintf("network.serviceSubnets[%d]", i), "%s overlaps the pod subnet %s; services and pods need separate ranges", s, pod)
			}
		}
	}
}

func checkCIDRs(p *problems, path string, cidrs []string) {
	for i, s := range cidrs {
		if _, err := netip.ParsePrefix(s); err != nil {
			p.errorf(fmt.Sprintf("%s[%d]", path, i), "%q is not a CIDR; use e.g. \"10.244.0.0/16\"", s)
		}
	}
}

func buildImage(p *problems, in ImageInput, c *Cluster) {
	img := Image{
		FactoryURL:      strings.TrimRight(in.FactoryURL, "/"),
		Platform:        in.Platform,
		Arch:            in.Arch,
		DatastoreID:     in.DatastoreID,
		SharedDatastore: in.SharedDatastore != nil && *in.SharedDatastore,
		ContentType:     ContentType(in.ContentType),
	}

	if img.FactoryURL == "" {
		img.FactoryURL = Defaults.FactoryURL
	}

	if _, err := imagefactory.FactoryHost(img.FactoryURL); err != nil {
		p.errorf("image.factoryUrl", "%v", err)
	}

	if img.Platform == "" {
		img.Platform = Defaults.Platform
	} else if img.Platform != "nocloud" && img.Platform != "metal" {
		p.errorf("image.platform", "%q is not supported; use \"nocloud\" (static addresses through Proxmox cloud-init) or \"metal\" (DHCP only)", img.Platform)
	}

	if img.Arch == "" {
		img.Arch = Defaults.Arch
	} else if img.Arch != "amd64" && img.Arch != "arm64" {
		p.errorf("image.arch", "%q is not a Talos architecture; use \"amd64\" or \"arm64\"", img.Arch)
	}

	if img.DatastoreID == "" {
		img.DatastoreID = Defaults.ImageDatastoreID
	} else if !storageIDRe.MatchString(img.DatastoreID) {
		p.errorf("image.datastoreId", "%q is not a Proxmox storage id; use e.g. \"local\"", img.DatastoreID)
	}

	switch img.ContentType {
	case "":
		img.ContentType = Defaults.ContentType
	case ContentImport, ContentISO:
	default:
		p.errorf("image.contentType", "%q is not supported; use \"import\" (qcow2 imported through the Proxmox API, no SSH, PVE 8.4+) or \"iso\" (raw image imported over SSH)", in.ContentType)
	}

	buildSchematic(p, in, &img)

	if c.TalosVersion != "" && img.SchematicID != "" && img.Platform != "" {
		img.InstallerImage, _ = imagefactory.InstallerImage(img.FactoryURL, img.Platform, img.SchematicID, c.TalosVersion)
	}

	c.Image = img
}

func buildSchematic(p *problems, in ImageInput, img *Image) {
	var (
		s   imagefactory.Schematic
		err error
	)

	if in.Schematic != "" {
		if in.Extensions != nil {
			p.warnf("image.extensions", "is ignored because image.schematic is set; list the extensions in the schematic")
		}

		s, err = imagefactory.Parse(in.Schematic)
		if err != nil {
			p.errorf("image.schematic", "%v; write an Image Factory schematic such as \"customization:\\n  systemExtensions:\\n    officialExtensions: [siderolabs/qemu-guest-agent]\"", err)
			return
		}
	} else {
		exts := in.Extensions
		if exts == nil {
			exts = Defaults.Extensions
		}

		seen := map[string]bool{}
		bad := false

		for i, e := range exts {
			path := fmt.Sprintf("image.extensions[%d]", i)
			switch {
			case !extensionRe.MatchString(e):
				p.errorf(path, "%q is not an official extension name; use the form \"siderolabs/qemu-guest-agent\"", e)
				bad = true
			case seen[e]:
				p.errorf(path, "%q is listed twice; list each extension once", e)
				bad = true
			}
			seen[e] = true
		}

		if bad {
			return
		}

		if s, err = imagefactory.FromExtensions(exts); err != nil {
			p.errorf("image.extensions", "%v", err)
			return
		}
	}

	img.SchematicYAML = s.YAML
	img.SchematicID = s.ID
	img.Extensions = s.Extensions
	img.GuestAgent = s.HasExtension(imagefactory.GuestAgentExtension)
}

func checkPatches(p *problems, path string, patches []Patch) {
	for i, patch := range patches {
		if !patch.Known {
			continue
		}

		at := fmt.Sprintf("%s[%d]", path, i)
		if strings.TrimSpace(patch.Text) == "" {
			p.errorf(at, "is empty; remove it or write a Talos machine configuration patch")
			continue
		}

		if _, err := configpatcher.LoadPatch([]byte(patch.Text)); err != nil {
			p.errorf(at, "is not a Talos machine configuration patch: %v; write YAML such as \"machine:\\n  sysctls:\\n    vm.max_map_count: \\\"262144\\\"\" or a JSON patch list", oneLine(err.Error()))
		}
	}
}

func buildManifests(p *problems, in Input, c *Cluster) {
	seen := map[string]bool{}

	for i, m := range in.InlineManifests {
		path := fmt.Sprintf("inlineManifests[%d]", i)
		switch {
		case m.Name == "":
			p.errorf(path+".name", "is required; Talos tracks each inline manifest by its name")
		case !manifestNameRe.MatchString(m.Name):
			p.errorf(path+".name", "%q is not a valid manifest name; use letters, digits, '-', '_' and '.'", m.Name)
		case strings.HasPrefix(m.Name, helmrender.ManifestPrefix):
			p.errorf(path+".name", "%q starts with %q, which is reserved for Helm releases the component renders; rename it", m.Name, helmrender.ManifestPrefix)
		case seen[m.Name]:
			p.errorf(path+".name", "%q is used twice; give each inline manifest its own name", m.Name)
		}
		seen[m.Name] = true

		if m.Contents.Known {
			if why := checkManifestYAML(m.Contents.Text); why != "" {
				p.errorf(path+".contents", "%s", why)
			}
		}

		c.InlineManifests = append(c.InlineManifests, InlineManifest(m))
	}

	for i, u := range in.ExtraManifests {
		if !isHTTPURL(u) {
			p.errorf(fmt.Sprintf("extraManifests[%d]", i), "%q is not an http(s) URL; Talos downloads extra manifests from URLs such as https://example.com/manifest.yaml", u)
		}
	}

	c.ExtraManifests = slices.Clone(in.ExtraManifests)
}

// checkManifestYAML returns why a Kubernetes manifest stream is unusable, or "".
func checkManifestYAML(text string) string {
	dec := yaml.NewDecoder(strings.NewReader(text))
	docs := 0

	for {
		var doc map[string]any

		err := dec.Decode(&doc)
		if err != nil {
			if err.Error() == "EOF" {
				break
			}

			return "is not valid YAML: " + oneLine(err.Error())
		}

		if doc == nil {
			continue
		}

		docs++

		if _, ok := doc["apiVersion"].(string); !ok {
			return fmt.Sprintf("document %d has no apiVersion; every Kubernetes object needs apiVersion and kind", docs)
		}

		if _, ok := doc["kind"].(string); !ok {
			return fmt.Sprintf("document %d has no kind; every Kubernetes object needs apiVersion and kind", docs)
		}
	}

	if docs == 0 {
		return "holds no Kubernetes object; write at least one YAML document with apiVersion and kind"
	}

	return ""
}

func orDefault(v, def []string) []string {
	if v == nil {
		return slices.Clone(def)
	}

	return slices.Clone(v)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
