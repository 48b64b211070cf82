// Package hostemu emulates what happens inside a Proxmox host when a VM
// boots the Talos nocloud image: it watches the Proxmox API fake's VMs and, when one starts,
// brings up an emulated Talos node in maintenance mode at the address from its cloud-init
// `ipconfig0` (or, with DHCP, at an address it leases, which the fake's guest agent reports only
// once the node has a configuration: siderolabs/talos#11651). The node gets the VM's NICs (netN:
// MAC, bridge, VLAN tag, MTU) as links eth0, eth1, …, ipconfig0's addresses on eth0 (IPv4 in
// 127.0.0.0/8, IPv6 in talosemu.LabIPv6Prefix; an IPv6-only VM's node is reached at its IPv6
// address, which only binds inside the lab's network namespace) and ipconfigN's static ones on
// the others; NICs hot-plugged into or unplugged from the running VM reach its node at once.
// When the VM stops, the node goes away (its etcd member hard-stopped, still listed); its disk
// keeps the installed configuration and etcd data, so the VM boots Talos installed when it starts
// again. A deleted VM's disk is gone. So a configuration can only be applied once its VM exists
// and runs, as on a real host.
package hostemu

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/pvefake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// Options configure a controller.
type Options struct {
	// DHCPPool is where DHCP addresses are leased from (default 127.0.100.0/24).
	DHCPPool netip.Prefix
	// Node adjusts the options of every emulated node (latency, failures, …) before it starts.
	Node func(vmid int, opts *talosemu.Options)
	// Kube, when set, runs each cluster's Kubernetes (API server, kubelets, manifests).
	Kube *talosemu.KubeOptions
	// Logf receives one line per node started or stopped.
	Logf func(format string, args ...any)
	// Extensions are the official extensions of an Image Factory schematic (the factory's).
	Extensions func(schematic string) []string
}

// Controller boots and halts emulated Talos nodes as the fake's VMs start and stop.
type Controller struct {
	ctx  context.Context
	opts Options

	mu       sync.Mutex
	fake     *pvefake.Server
	nodes    map[int]*talosemu.Node
	clusters map[string]*talosemu.Cluster
	disks    map[int]*talosemu.SystemDisk // what each VM's disk holds across power cycles
	// joined is the cluster each VM's disk belongs to: a VM started again boots into the cluster
	// it is installed in, whatever its tags say now (tags change; adopting a cluster retags it).
	joined map[int]*talosemu.Cluster
	// byID is the cluster of each Talos cluster id seen in a first configuration: a node whose
	// VM's tags put it elsewhere at its first boot (a node added by another tool than the one
	// that made the cluster, say) moves there, as real Talos nodes belong together by their
	// configurations.
	byID   map[string]*talosemu.Cluster
	dir    string // where the disks and etcd data live
	leases map[int]netip.Prefix
	errs   []error
}

// New returns a controller; pass its Handle as the fake's OnEvent and call Attach once the fake
// runs. Nodes stop when ctx ends or on Close.
func New(ctx context.Context, opts Options) *Controller {
	if !opts.DHCPPool.IsValid() {
		opts.DHCPPool = netip.MustParsePrefix("127.0.100.0/24")
	}

	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}

	return &Controller{
		ctx: ctx, opts: opts,
		nodes: map[int]*talosemu.Node{}, clusters: map[string]*talosemu.Cluster{}, leases: map[int]netip.Prefix{},
		disks: map[int]*talosemu.SystemDisk{}, joined: map[int]*talosemu.Cluster{},
		byID: map[string]*talosemu.Cluster{},
	}
}

// Attach gives the controller the fake, to report DHCP leases through its guest agent.
func (c *Controller) Attach(fake *pvefake.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.fake = fake
}

// Handle reacts to one VM lifecycle event.
func (c *Controller) Handle(e pvefake.Event) {
	switch e.Type {
	case pvefake.EventStarted, pvefake.EventRebooted:
		if err := c.boot(e); err != nil {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
			c.opts.Logf("lab: VM %d (%s): %v", e.VMID, e.Name, err)
		}
	case pvefake.EventNICsChanged:
		c.hotplug(e)
	case pvefake.EventStopped:
		c.halt(e.VMID)
	case pvefake.EventDeleted:
		c.halt(e.VMID)
		c.dropDisk(e.VMID)
	case pvefake.EventCreated:
	}
}

// Errors returns the VMs that could not get a node (e.g. no usable ipconfig0).
func (c *Controller) Errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()

	return slices.Clone(c.errs)
}

// Nodes returns the running emulated nodes by VM id.
func (c *Controller) Nodes() map[int]*talosemu.Node {
	c.mu.Lock()
	defer c.mu.Unlock()

	out := make(map[int]*talosemu.Node, len(c.nodes))
	for id, n := range c.nodes {
		out[id] = n
	}

	return out
}

// Close stops the clusters' Kubernetes and etcd members, halts every node and removes the disks.
func (c *Controller) Close() {
	c.mu.Lock()
	ids := make([]int, 0, len(c.nodes))
	for id := range c.nodes {
		ids = append(ids, id)
	}

	clusters := slices.Collect(maps.Values(c.clusters))
	c.mu.Unlock()

	// Kubernetes goes first: its watches on etcd would hold each member's graceful gRPC stop for
	// seconds.
	for _, cl := range clusters {
		cl.Close() //nolint:errcheck // removes a temporary directory
	}

	// The whole lab powers off at once.
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { c.halt(id) })
	}

	wg.Wait()

	if c.dir != "" {
		os.RemoveAll(c.dir) //nolint:errcheck // temporary
	}
}

// disk is VM vmid's system disk, created at its first boot.
func (c *Controller) disk(vmid int) (*talosemu.SystemDisk, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	if d := c.disks[vmid]; d != nil {
		return d, nil
	}

	if c.dir == "" {
		dir, err := os.MkdirTemp("", "lab-disks-")
		if err != nil {
			return nil, err
		}

		c.dir = dir
	}

	d, err := talosemu.NewSystemDisk(filepath.Join(c.dir, strconv.Itoa(vmid)))
	if err != nil {
		return nil, err
	}

	c.disks[vmid] = d

	return d, nil
}

// dropDisk forgets a deleted VM's disk.
func (c *Controller) dropDisk(vmid int) {
	c.mu.Lock()
	d := c.disks[vmid]
	delete(c.disks, vmid)
	delete(c.joined, vmid)
	c.mu.Unlock()

	if d != nil {
		d.Wipe() //nolint:errcheck // temporary
	}
}

func (c *Controller) boot(e pvefake.Event) error {
	c.mu.Lock()
	if _, running := c.nodes[e.VMID]; running {
		c.mu.Unlock()
		// A reboot of a running VM: the node keeps its state, as Talos on disk does, and finds
		// the NICs the VM has now (a change made with hot-plug off takes effect).
		c.hotplug(e)

		return nil
	}
	c.mu.Unlock()

	addr, nics, err := c.network(e)
	if err != nil {
		return err
	}

	disk, err := c.disk(e.VMID)
	if err != nil {
		return fmt.Errorf("the VM's disk: %w", err)
	}

	booted := c.bootImage(e)
	security, refused := firmware(e.Config, booted)

	opts := talosemu.Options{
		Security:     security,
		Extensions:   c.opts.Extensions,
		TalosVersion: booted.Version,
		MemoryBytes:  memoryBytes(e.Config),
		SystemUUID:   systemUUID(e.Config),
		Schematic:    booted.Schematic,
		Disk:         disk,
		Address:      addr.Addr().String(),
		Cluster:      c.cluster(e),
		Join:         func(id string) *talosemu.Cluster { return c.join(e.VMID, id) },
		Hostname:     e.Name,
		Logf:         c.opts.Logf,
		DataDisks:    dataDisks(e.Config),
		MACAddress:   macAddress(e.Config["net0"]),
		NICs:         nics,
	}

	if refused != "" {
		// The VM runs, but its firmware never hands over to Talos: no API ever answers.
		opts.Unreachable = talosemu.RefuseConnections
		c.opts.Logf("lab: VM %d (%s) does not boot: %s", e.VMID, e.Name, refused)
	}

	if c.opts.Node != nil {
		c.opts.Node(e.VMID, &opts)
	}

	n, err := talosemu.Start(c.ctx, opts)
	if err != nil {
		return fmt.Errorf("starting the emulated Talos node at %s: %w", addr.Addr(), err)
	}

	c.mu.Lock()
	c.nodes[e.VMID] = n
	_, leased := c.leases[e.VMID]
	c.mu.Unlock()

	if leased {
		go c.reportLeaseOnceConfigured(e.VMID, n, addr)
	}

	mode := "in maintenance mode"
	if disk.Installed() {
		mode = "installed on its disk"
	}

	c.opts.Logf("lab: VM %d (%s on %s) booted Talos %s at %s", e.VMID, e.Name, e.Node, mode, addr.Addr())

	return nil
}

func (c *Controller) halt(vmid int) {
	c.mu.Lock()
	n := c.nodes[vmid]
	delete(c.nodes, vmid)
	fake := c.fake
	_, leased := c.leases[vmid]
	delete(c.leases, vmid)
	c.mu.Unlock()

	if leased && fake != nil {
		fake.ClearGuestAddress(vmid)
	}

	if n != nil {
		_ = n.Close()
		c.opts.Logf("lab: VM %d stopped; its Talos node at %s is gone", vmid, n.IP())
	}
}

// reportLeaseOnceConfigured makes the guest agent report a DHCP lease once the node has left
// maintenance mode: Talos starts extension services, the QEMU guest agent among them, only with a
// machine configuration (siderolabs/talos#11651), so before that Proxmox answers "QEMU guest agent
// is not running" and a deployment that waits for the agent's address waits forever.
func (c *Controller) reportLeaseOnceConfigured(vmid int, n *talosemu.Node, addr netip.Prefix) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()

	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}

		c.mu.Lock()
		current, fake := c.nodes[vmid] == n, c.fake
		c.mu.Unlock()

		if !current {
			return
		}

		if n.Config() != nil {
			if fake != nil {
				fake.SetGuestAddress(vmid, addr)
			}

			return
		}
	}
}

// macAddress is the MAC of a net0 value ("virtio=BC:24:11:00:00:01,bridge=vmbr0").
func macAddress(net0 string) string {
	for _, kv := range strings.Split(net0, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.Contains(v, ":") && len(v) == 17 && k != "bridge" {
			return v
		}
	}

	return ""
}

func (c *Controller) lease(vmid int) (netip.Prefix, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	used := map[netip.Addr]bool{}
	for _, p := range c.leases {
		used[p.Addr()] = true
	}

	for a := c.opts.DHCPPool.Addr().Next(); c.opts.DHCPPool.Contains(a); a = a.Next() {
		if used[a] {
			continue
		}

		p := netip.PrefixFrom(a, c.opts.DHCPPool.Bits())
		c.leases[vmid] = p

		return p, nil
	}

	return netip.Prefix{}, fmt.Errorf("the DHCP pool %s is exhausted", c.opts.DHCPPool)
}

// join is the cluster of Talos cluster id for VM vmid getting its first configuration: the one
// that id's first node was in while it has nodes, else (the first node of it, or the first since
// all of that cluster's went) the one vmid's tags put it in. A VM deleted meanwhile joins nothing.
func (c *Controller) join(vmid int, id string) *talosemu.Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()

	if c.disks[vmid] == nil || c.joined[vmid] == nil {
		return nil
	}

	if cl := c.byID[id]; cl != nil && cl != c.joined[vmid] && len(cl.Nodes()) > 0 {
		c.joined[vmid] = cl

		return cl
	}

	c.byID[id] = c.joined[vmid]

	return c.joined[vmid]
}

// cluster groups the nodes of one Talos cluster, so control planes join etcd and workers get
// their certificates: VMs with the same tags at their first boot, apart from talos, the role and
// the VM's own instance tag (`talos-i-…`), belong together (the component tags every VM with
// `talos`, its role, the cluster name and its instance). A VM started again boots into the
// cluster its disk joined, as Talos on disk does, whatever its tags say by then.
func (c *Controller) cluster(e pvefake.Event) *talosemu.Cluster {
	c.mu.Lock()
	joined := c.joined[e.VMID]
	c.mu.Unlock()

	if joined != nil {
		return joined
	}

	var key []string
	for _, t := range strings.Split(e.Config["tags"], ";") {
		// Tags of one node, not of its cluster: the role, the instance, how it boots and how its
		// disk is encrypted (talos-secureboot, talos-luks-*).
		if t != "" && t != "talos" && t != "controlplane" && t != "worker" && !strings.HasPrefix(t, "talos-i-") &&
			t != "talos-secureboot" && !strings.HasPrefix(t, "talos-luks-") {
			key = append(key, t)
		}
	}

	slices.Sort(key)
	k := strings.Join(key, ";")

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.clusters[k] == nil {
		c.clusters[k] = talosemu.NewClusterWith(talosemu.ClusterOptions{Logf: c.opts.Logf, Kube: c.opts.Kube})
	}

	c.joined[e.VMID] = c.clusters[k]

	return c.clusters[k]
}
