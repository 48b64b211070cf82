package talosconfig

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	configtypes "github.com/siderolabs/talos/pkg/machinery/config/config"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// checkNetwork reads the node's address, route, VIP, resolvers, time servers and data volumes
// back from the generated configuration: from `.machine.network` up to contract v1.11, from the
// documents after it (where the deprecated fields must be gone).
func checkNetwork(t *testing.T, cfg config.Provider, c *spec.Cluster, n spec.Node, a Addresses, contract, at string) {
	t.Helper()

	wantVIP := n.Role == spec.RoleControlPlane && c.VIP != ""

	if !MultiDocument(contract) {
		checkInterfaces(t, cfg, c, n, a, wantVIP, at)

		return
	}

	//nolint:staticcheck // checks that the deprecated fields are gone
	raw := cfg.RawV1Alpha1().MachineConfig
	//nolint:staticcheck // as above
	if raw.MachineNetwork != nil && (raw.MachineNetwork.NetworkHostname != "" || len(raw.MachineNetwork.NetworkInterfaces) > 0 ||
		len(raw.MachineNetwork.NameServers) > 0) || raw.MachineTime != nil {
		t.Errorf("%s: contract %s still sets deprecated machine.network/time", at, contract)
	}

	// Data disks outside /var/mnt stay machine.disks (a user volume mounts only under /var/mnt).
	var outside []string
	for _, d := range n.DataDisks {
		if d.MountPath != "" && !strings.HasPrefix(d.MountPath, "/var/mnt/") {
			outside = append(outside, d.MountPath)
		}
	}

	var disks []string
	for _, d := range cfg.Machine().Disks() {
		for _, p := range d.Partitions() {
			disks = append(disks, p.MountPoint())
		}
	}

	if !slices.Equal(disks, outside) {
		t.Errorf("%s: machine.disks mount %v, want %v", at, disks, outside)
	}

	checkLinkDocuments(t, cfg, c, n, a, wantVIP, at)

	if len(c.Network.Nameservers) > 0 && len(cfg.NetworkResolverConfig().Resolvers()) != len(c.Network.Nameservers) {
		t.Errorf("%s: resolvers = %v, want %v", at, cfg.NetworkResolverConfig().Resolvers(), c.Network.Nameservers)
	}

	if len(c.Network.NTPServers) > 0 && !slices.Equal(cfg.NetworkTimeSyncConfig().Servers(), c.Network.NTPServers) {
		t.Errorf("%s: time servers = %v, want %v", at, cfg.NetworkTimeSyncConfig().Servers(), c.Network.NTPServers)
	}

	var want []string
	for i, d := range n.DataDisks {
		if strings.HasPrefix(d.MountPath, "/var/mnt/") {
			want = append(want, volumeNames(n)[i])
		}
	}

	var got []string
	for _, v := range cfg.UserVolumeConfigs() {
		got = append(got, v.Name())
	}

	if !slices.Equal(got, want) {
		t.Errorf("%s: user volumes = %v, want %v", at, got, want)
	}
}

func TestVolumeNamesAreUniquePerNode(t *testing.T) {
	t.Parallel()

	n := spec.Node{DataDisks: []spec.DataDisk{
		{MountPath: "/var/lib/longhorn"}, {}, {MountPath: "/srv/data"}, {MountPath: "/mnt/Data"}, {MountPath: "/var/mnt/data-2"},
	}}

	got := volumeNames(n)
	want := map[int]string{0: "longhorn", 2: "data", 3: "data-3", 4: "data-2"}

	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("volume names %v, want %v", got, want)
	}
}

// installerImage is the installer the configuration names: machine.install up to contract
// v1.13, the UnattendedInstallConfig document from v1.14.
func installerImage(cfg config.Provider) string {
	if u := cfg.UnattendedInstallConfig(); u != nil {
		return u.InstallerImage()
	}

	return cfg.Machine().Install().Image()
}

func TestContractV114DataDiskMountPath(t *testing.T) {
	t.Parallel()

	c, err := spec.Build(homelab())
	if err != nil {
		t.Fatal(err)
	}

	for _, n := range c.Nodes {
		if n.Name != "worker-1" {
			continue
		}

		_, err := NodePatch(c, n, staticAddrs(c, n), "v1.14")
		if err == nil || !strings.Contains(err.Error(), "nodes.worker-1.dataDisks[0].mountPath") || !strings.Contains(err.Error(), "use /var/mnt/longhorn") {
			t.Errorf("a data disk at /var/lib/longhorn under contract v1.14: %v", err)
		}
	}
}

func TestContractV114ManifestNames(t *testing.T) {
	t.Parallel()

	if _, err := ManifestsPatch([]Manifest{{Name: "helm-cilium", Contents: "a: b\n"}, {Name: "l2.policy", Contents: "a: b\n"}}, nil, "v1.14"); err != nil {
		t.Errorf("DNS-1123 names refused: %v", err)
	}

	_, err := ManifestsPatch([]Manifest{{Name: "My_Manifest", Contents: "a: b\n"}}, nil, "v1.14")
	if err == nil || !strings.Contains(err.Error(), `"My_Manifest"`) || !strings.Contains(err.Error(), "DNS-1123") {
		t.Errorf("a name Talos v1.14 refuses: %v", err)
	}

	if _, err := ManifestsPatch([]Manifest{{Name: "My_Manifest", Contents: "a: b\n"}}, nil, "v1.13"); err != nil {
		t.Errorf("contract v1.13 keeps any name: %v", err)
	}
}

// checkInterfaces reads the node's links back from `.machine.network.interfaces` (up to
// contract v1.11): one interface per link, in order, with its addresses, routes, MTU, DHCP,
// bond and VIP.
func checkInterfaces(t *testing.T, cfg config.Provider, c *spec.Cluster, n spec.Node, a Addresses, wantVIP bool, at string) {
	t.Helper()

	devs := cfg.Machine().Network().Devices()
	if len(devs) != len(n.Links) {
		t.Fatalf("%s: %d interfaces in machine.network, want %d", at, len(devs), len(n.Links))
	}

	for i, l := range n.Links {
		d := devs[i]
		at := at + "/" + l.Name

		if got := d.VIPConfig() != nil; got != (wantVIP && l.Cluster) {
			t.Errorf("%s: VIP configured = %v, want %v", at, got, wantVIP && l.Cluster)
		}

		if want := linkAddresses(c, n, l, a); !slices.Equal(d.Addresses(), want) {
			t.Errorf("%s: addresses = %v, want %v", at, d.Addresses(), want)
		}

		if len(d.Routes()) != len(linkRoutes(c, l)) || d.MTU() != l.MTU || d.DHCP() != (l.DHCP || l.Cluster && c.Network.DHCP) {
			t.Errorf("%s: %d routes, MTU %d, DHCP %v; want %d, %d, %v", at, len(d.Routes()), d.MTU(), d.DHCP(), len(linkRoutes(c, l)), l.MTU, l.DHCP)
		}

		if l.BondMode != "" && (d.Bond() == nil || d.Bond().Mode() != l.BondMode || len(d.Bond().Selectors()) != len(l.NICs)) {
			t.Errorf("%s: want a %s bond of %d NICs, got %+v", at, l.BondMode, len(l.NICs), d.Bond())
		}
	}
}

// checkLinkDocuments reads the node's links back from the documents of contract v1.12 and later:
// an alias per NIC, a link or bond configuration per link with its addresses, routes and MTU,
// DHCP where asked, the VIP on the cluster link.
func checkLinkDocuments(t *testing.T, cfg config.Provider, c *spec.Cluster, n spec.Node, a Addresses, wantVIP bool, at string) {
	t.Helper()

	var aliases []string
	for _, al := range cfg.NetworkLinkAliasConfigs() {
		aliases = append(aliases, al.Name())
	}

	if len(aliases) != len(n.NICs) || aliases[0] != "net0" {
		t.Fatalf("%s: link aliases %v, want one per NIC (%d)", at, aliases, len(n.NICs))
	}

	cluster := n.Links[0].Name

	vips := cfg.NetworkVirtualIPConfigs()
	if got := len(vips) == 1 && vips[0].Link() == cluster; got != wantVIP {
		t.Errorf("%s: VIP on %s = %v, want %v", at, cluster, got, wantVIP)
	}

	var dhcp, wantDHCP []string
	for _, d := range cfg.NetworkDHCPConfigs() {
		dhcp = append(dhcp, d.Name())
	}

	links := map[string]configtypes.NetworkCommonLinkConfig{}
	for _, l := range cfg.NetworkCommonLinkConfigs() {
		links[l.Name()] = l
	}

	for _, l := range n.Links {
		if l.DHCP || l.Cluster && c.Network.DHCP {
			wantDHCP = append(wantDHCP, l.Name)
		}

		want := linkAddresses(c, n, l, a)
		doc, ok := links[l.Name]

		if !ok {
			if len(want) > 0 || l.MTU > 0 || l.BondMode != "" {
				t.Errorf("%s: no link configuration for %s", at, l.Name)
			}

			continue
		}

		var got []string
		for _, ad := range doc.Addresses() {
			got = append(got, ad.Address().String())
		}

		if !slices.Equal(got, want) || len(doc.Routes()) != len(linkRoutes(c, l)) || int(doc.MTU().ValueOrZero()) != l.MTU {
			t.Errorf("%s: link %s has addresses %v, %d routes, MTU %d; want %v, %d, %d", at, l.Name, got, len(doc.Routes()),
				doc.MTU().ValueOrZero(), want, len(linkRoutes(c, l)), l.MTU)
		}

		if bond, isBond := doc.(configtypes.NetworkBondConfig); isBond != (l.BondMode != "") || isBond && (bond.Mode().String() != l.BondMode || len(bond.Links()) != len(l.NICs)) {
			t.Errorf("%s: link %s bond = %v, want mode %q over %d NICs", at, l.Name, isBond, l.BondMode, len(l.NICs))
		}
	}

	if !slices.Equal(dhcp, wantDHCP) {
		t.Errorf("%s: DHCP on %v, want %v", at, dhcp, wantDHCP)
	}
}
