package talosemu

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/validation"
)

// Defaults for the zero values of Options.
const (
	DefaultPort                = 50000
	DefaultTalosVersion        = "v1.11.5"
	DefaultSystemDiskSizeBytes = 32 << 30 // Proxmox' usual 32 GiB boot disk
	DefaultInstallDelay        = 50 * time.Millisecond
	DefaultRebootDelay         = 50 * time.Millisecond
)

// Unreachable selects how a node that never comes up misbehaves.
type Unreachable int

const (
	// Reachable is the default: the node serves its API.
	Reachable Unreachable = iota
	// RefuseConnections never opens the listener: clients get "connection refused" at once, as from
	// a machine whose apid is not running (fast failures).
	RefuseConnections
	// HangHandshake accepts TCP connections and never answers the TLS handshake, like a host that
	// swallows packets: clients block until their deadline (slow failures).
	HangHandshake
)

// Disk is an additional disk the node reports from the storage Disks API (like a Proxmox
// scsiN disk with a serial).
type Disk struct {
	SizeBytes uint64
	Serial    string
	// Model defaults to "QEMU HARDDISK".
	Model string
	// SSD reports the disk as non-rotational (Proxmox' ssd=1 flag).
	SSD bool
}

// Options configure one emulated node. The zero value of every field is usable; only Address
// normally needs setting.
type Options struct {
	// Address is the address the node is reached at (its API listens there; default
	// 127.0.0.1): an IPv4 address in 127.0.0.0/8, or, for an IPv6-only node, one in
	// LabIPv6Prefix (which only a process inside the lab's network namespace can bind). The node
	// also listens on every other lab address its links hold (a dual-stack node's IPv6 one, when
	// it can be bound), and stops answering at an address it no longer holds.
	Address string
	// Port is the apid port (default 50000, the one Talos clients add to bare endpoints).
	Port int
	// Cluster is the registry this node belongs to. Nodes of one Cluster see each other: control
	// planes join etcd once one of them is bootstrapped, workers get their API certificate from a
	// control plane's OS CA key (trustd), and the `node` metadata can name any of them. Nil means a
	// private cluster of one node.
	Cluster *Cluster
	// Join, when set, is asked for the cluster a node in maintenance mode belongs to once it gets
	// its first configuration, by the configuration's cluster id: real Talos nodes belong together
	// by what their configurations say (the cluster's CA, endpoint and id), not by anything the
	// hypervisor knows. The node moves there from Cluster when the answer is another one.
	Join func(clusterID string) *Cluster
	// Hostname is used when the applied config names none (default "talos-127-0-0-X").
	Hostname string
	// TalosVersion is the version the node boots first (default v1.11.5): what the Version API
	// reports until an upgrade; it also decides which upgrade APIs the node serves.
	TalosVersion string
	// Schematic is the Image Factory schematic of the image the node boots first.
	Schematic string
	// Extensions are the official extensions of a schematic (the factory's), which the node
	// reports (ExtensionStatus) for the schematic it runs; nil: only the schematic itself.
	Extensions func(schematic string) []string
	// MemoryBytes is the memory the Memory API reports (default 4 GiB).
	MemoryBytes uint64
	// SystemUUID is the machine's SMBIOS system UUID (a Proxmox VM's smbios1 uuid), which its
	// kubelet reports as the Node's systemUUID (default: the hostname).
	SystemUUID string
	// Faults turns on failures (see Faults; Node.SetFaults changes them later).
	Faults Faults
	// SystemDiskSizeBytes is the size of /dev/sda (default 32 GiB).
	SystemDiskSizeBytes uint64
	// Disk, when set, is the VM's system disk: the node boots configured from it if it holds a
	// configuration, and saves its configuration, version and etcd data there when it stops.
	Disk *SystemDisk
	// DataDisks are reported after /dev/sda as /dev/sdb, /dev/sdc, …
	DataDisks []Disk
	// Security is what the VM's firmware made of its boot image: the SecurityState the node
	// reports, and whether a TPM disk encryption key can be enrolled (zero: BIOS boot, no TPM).
	Security Security
	// NICs are the VM's network devices: links eth0, eth1, … (LinkStatus in every mode,
	// maintenance included, as `talosctl get links --insecure` shows them) with their cloud-init
	// addresses (AddressStatus). The machine configuration's links, bonds, MTUs, addresses and
	// VIPs apply to them as Talos applies them (see network.go). Address is added to the first
	// NIC's addresses when no NIC has it. Empty: one NIC with MACAddress and Address.
	NICs []NIC
	// MACAddress is the MAC of the one NIC a node started without NICs has (the VM's net0);
	// empty: one made from Address in Proxmox' OUI BC:24:11.
	MACAddress string
	// InstallDelay is how long the API is down after the first configuration is applied (the
	// install and reboot of a real node). 0 means DefaultInstallDelay, negative means none.
	InstallDelay time.Duration
	// RebootDelay is how long the API is down during a reboot or reset. 0 means
	// DefaultRebootDelay, negative means none.
	RebootDelay time.Duration
	// ValidationMode is the runtime mode configs are validated for (default NocloudMode).
	ValidationMode validation.RuntimeMode
	// InvalidArgumentOnParseError answers an unparseable config applied in maintenance mode with
	// codes.InvalidArgument. Real Talos answers a plain error (codes.Unknown), which the Talos
	// Terraform provider retries until its 10-minute timeout; tests that want a fast failure set this.
	InvalidArgumentOnParseError bool

	// Latency delays every call by this much before it is handled.
	Latency time.Duration
	// FailureRate is the share of calls (0..1) answered with codes.Unavailable instead of being
	// handled. Which calls fail is decided by a random source seeded with Seed, so a sequence of
	// calls made one after another fails the same way on every run.
	FailureRate float64
	// Seed seeds the failure draw.
	Seed uint64
	// Unreachable makes the node never come up (see the constants).
	Unreachable Unreachable

	// Logf, when set, receives one line per state change (pass t.Logf in tests).
	Logf func(format string, args ...any)
}

// NocloudMode is the validation mode of a Talos nocloud VM (the Proxmox image) as this project
// requires it: String() "nocloud", an install section required, not in a container.
//
// Real Talos validates nocloud machines with its "cloud" mode, which does not require
// machine.install; this mode is stricter on purpose, because the component always installs to disk.
// As on a real node, the install requirement is dropped once the node is installed. What
// satisfies it depends on the node's version: machine.install, or from v1.14 an
// UnattendedInstallConfig document (see Node.validate).
type NocloudMode struct{}

// String implements validation.RuntimeMode.
func (NocloudMode) String() string { return "nocloud" }

// RequiresInstall implements validation.RuntimeMode.
func (NocloudMode) RequiresInstall() bool { return true }

// InContainer implements validation.RuntimeMode.
func (NocloudMode) InContainer() bool { return false }

// installedMode wraps a mode once the node is installed, like Talos' own modeWrapper: an
// installed node no longer requires install instructions.
type installedMode struct{ validation.RuntimeMode }

func (installedMode) RequiresInstall() bool { return false }

// normalize checks o and fills in defaults.
func (o Options) normalize() (Options, netip.Addr, error) {
	if o.Address == "" {
		o.Address = "127.0.0.1"
	}

	ip, err := netip.ParseAddr(o.Address)
	if err != nil {
		return o, ip, fmt.Errorf("address %q: %w", o.Address, err)
	}

	if !LabAddress(ip) {
		return o, ip, fmt.Errorf("address %q: emulated nodes listen on 127.0.0.0/8 or %s only", o.Address, LabIPv6Prefix)
	}

	ip = ip.Unmap()
	o.NICs = slices.Clone(o.NICs)

	if len(o.NICs) == 0 {
		o.NICs = defaultNICs(o, ip)
	}

	if !slices.ContainsFunc(o.NICs, func(c NIC) bool {
		return slices.ContainsFunc(c.Addresses, func(p netip.Prefix) bool { return p.Addr() == ip })
	}) {
		o.NICs[0].Addresses = append(slices.Clone(o.NICs[0].Addresses), netip.PrefixFrom(ip, ip.BitLen()))
	}

	if o.Port == 0 {
		o.Port = DefaultPort
	}

	if o.Port < 1 || o.Port > 65535 {
		return o, ip, fmt.Errorf("port %d is out of range", o.Port)
	}

	if o.FailureRate < 0 || o.FailureRate > 1 {
		return o, ip, errors.New("failure rate must lie between 0 and 1")
	}

	o.InstallDelay = defaultDelay(o.InstallDelay, DefaultInstallDelay)
	o.RebootDelay = defaultDelay(o.RebootDelay, DefaultRebootDelay)

	if o.TalosVersion == "" {
		o.TalosVersion = DefaultTalosVersion
	}

	if o.SystemDiskSizeBytes == 0 {
		o.SystemDiskSizeBytes = DefaultSystemDiskSizeBytes
	}

	if o.ValidationMode == nil {
		o.ValidationMode = NocloudMode{}
	}

	if o.Hostname == "" {
		o.Hostname = "talos-" + strings.NewReplacer(".", "-", ":", "-").Replace(ip.String())
	}

	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}

	return o, ip, nil
}

func defaultDelay(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	default:
		return d
	}
}
