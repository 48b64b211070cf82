package talosconfig

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// checkNetwork reads the node's address, route, VIP, resolvers, time servers and data volumes
// back from the generated configuration: from `.machine.network` up to contract v1.11, from the
// documents after it (where the deprecated fields must be gone).
func checkNetwork(t *testing.T, cfg config.Provider, c *spec.Cluster, n spec.Node, a Addresses, contract, at string) {
	t.Helper()

	wantVIP := n.Role == spec.RoleControlPlane && c.VIP != ""
	wantAddr := fmt.Sprintf("%s/%d", a.NodeIP, c.Network.PrefixLength)

	if !MultiDocument(contract) {
		devs := cfg.Machine().Network().Devices()
		if len(devs) != 1 {
			t.Fatalf("%s: %d interfaces in machine.network, want 1", at, len(devs))
		}

		if got := devs[0].VIPConfig() != nil; got != wantVIP {
			t.Errorf("%s: VIP configured = %v, want %v", at, got, wantVIP)
		}

		if !c.Network.DHCP && !slices.Equal(devs[0].Addresses(), []string{wantAddr}) {
			t.Errorf("%s: addresses = %v, want %s", at, devs[0].Addresses(), wantAddr)
		}

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

	const linkAlias = "net0"

	aliases := cfg.NetworkLinkAliasConfigs()
	if len(aliases) != 1 || aliases[0].Name() != linkAlias {
		t.Fatalf("%s: want one link alias %q, got %d", at, linkAlias, len(aliases))
	}

	vips := cfg.NetworkVirtualIPConfigs()
	if got := len(vips) == 1 && vips[0].Link() == linkAlias; got != wantVIP {
		t.Errorf("%s: VIP on %s = %v, want %v", at, linkAlias, got, wantVIP)
	}

	if c.Network.DHCP {
		if dhcp := cfg.NetworkDHCPConfigs(); len(dhcp) != 1 || dhcp[0].Name() != linkAlias {
			t.Errorf("%s: want DHCP on %s", at, linkAlias)
		}
	} else {
		links := cfg.NetworkCommonLinkConfigs()
		if len(links) != 1 || len(links[0].Addresses()) != 1 || links[0].Addresses()[0].Address().String() != wantAddr {
			t.Fatalf("%s: want link %s with address %s", at, linkAlias, wantAddr)
		}

		if r := links[0].Routes(); len(r) != 1 || r[0].Gateway().ValueOrZero().String() != c.Network.Gateway {
			t.Errorf("%s: want one route through %s, got %v", at, c.Network.Gateway, r)
		}
	}

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
