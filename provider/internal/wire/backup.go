package wire

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/proxmox"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/lifecycle"
)

// Backup is what EtcdBackup returns: the snapshot resource (nil without etcdBackup) and what the
// resources that touch nodes must wait for.
type Backup struct {
	Snapshot *lifecycle.EtcdSnapshotOutputs
	// Before are the resources everything that touches a node depends on: the snapshot.
	Before []pulumi.Resource
	// Restores says that this `up` leaves no control plane of the running cluster in place, so
	// the new bootstrap restores the snapshot taken first.
	Restores bool
}

// snapshotTimeout bounds one snapshot (streaming, verifying, storing).
const snapshotTimeout = "10m"

// EtcdBackup registers the etcd snapshot (`<name>-etcd-snapshot`, an EtcdSnapshot) when the
// cluster has etcdBackup. Its trigger changes with every change that can lose etcd's data or
// quorum — the Talos version and schematic, the Kubernetes version, the control planes and their
// hosts and VM ids — and with etcdBackup.snapshotNow, so it takes one snapshot in the `up` that
// makes such a change. A new cluster's trigger is empty: there is nothing to keep yet.
//
// It asks the control planes that run (Proxmox holds their VM) at addrs: with static addresses
// these are known before any VM, and the caller registers the VMs after it, depending on it, so
// a VM replaced in this `up` goes after the snapshot; a DHCP cluster's addresses come from its
// VMs, so there it comes after them (and the refusal of data-losing plans says so).
func EtcdBackup(s Scope, secrets *Secrets, inv *proxmox.Inventory, addrs Addresses, fresh bool, loss spec.DataLoss,
	self Lifecycle,
) (*Backup, error) {
	c := s.Cluster
	b := c.EtcdBackup

	if b == nil {
		return &Backup{}, nil
	}

	cps := pulumi.StringMap{}

	for _, n := range c.ControlPlanes() {
		if inv.HasVM(c.Name, n.Name) {
			cps[n.Name] = addrs[n.Name]
		}
	}

	trigger := ""
	if !fresh {
		trigger = snapshotTrigger(c)
	}

	in, a := lifecycle.EtcdSnapshotKind.Inputs()
	lifecycle.Set(in, &a.ClusterName, pulumi.String(c.Name))
	setTalosCA(in, &a.TalosCA, secrets)
	lifecycle.Set(in, &a.ControlPlanes, cps.ToStringMapOutput())
	lifecycle.Set(in, &a.Destination, pulumi.String(b.Destination))
	lifecycle.Set(in, &a.AgeRecipients, pulumi.ToStringArray(b.AgeRecipients).ToStringArrayOutput())
	lifecycle.Set(in, &a.Keep, pulumi.Int(b.Keep))
	lifecycle.Set(in, &a.Required, pulumi.Bool(b.Required))
	lifecycle.Set(in, &a.Trigger, pulumi.String(trigger))
	lifecycle.Set(in, &a.Timeout, pulumi.String(snapshotTimeout))

	snap, err := lifecycle.EtcdSnapshotKind.Register(s.Ctx, s.child("etcd-snapshot"), in, s.parent(), self.option)
	if err != nil {
		return nil, errorf("registering the etcd snapshot: %w", err)
	}

	return &Backup{Snapshot: snap, Before: []pulumi.Resource{snap}, Restores: len(loss.Replaced)+len(loss.Removed) > 0}, nil
}

// snapshotTrigger is what, changed, makes an `up` risky for etcd: see EtcdBackup.
func snapshotTrigger(c *spec.Cluster) string {
	var cps []string
	for _, n := range c.ControlPlanes() {
		cp := fmt.Sprintf("%s@%s/%d", n.Name, n.HostNode, n.VMID)
		if sec := c.SecurityTags(n); len(sec) > 0 {
			cp += "+" + strings.Join(sec, "+") // Secure Boot or disk encryption changed replaces the VM
		}

		cps = append(cps, cp)
	}

	// Every image's schematic (the cluster's alone when no node has its own image).
	var schematics []string
	for _, img := range c.Schematics() {
		schematics = append(schematics, img.SchematicID)
	}

	return fmt.Sprintf("talos=%s schematic=%s kubernetes=%s controlPlanes=%s snapshotNow=%s",
		c.TalosVersion, strings.Join(schematics, ","), c.KubernetesVersion, strings.Join(cps, ","), c.EtcdBackup.SnapshotNow)
}

// StaticAddresses are the nodes' addresses with static addressing (nil with DHCP, where they
// come from the VMs).
func StaticAddresses(c *spec.Cluster) Addresses {
	if c.Network.DHCP {
		return nil
	}

	a := Addresses{}
	for _, n := range c.Nodes {
		a[n.Name] = pulumi.String(n.IP).ToStringOutput()
	}

	return a
}
