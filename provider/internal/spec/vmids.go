package spec

// The default VM ids of a cluster's nodes come from [DefaultVMIDStart, DefaultVMIDStart +
// DefaultVMIDSize - 1] unless vmIdRange says otherwise: far above the ids Proxmox hands out by
// itself (from 100 up), so they rarely meet other VMs.
const (
	DefaultVMIDStart = 800000
	DefaultVMIDSize  = 100000
	maxVMID          = 999999999
)

// VMIDRange is an inclusive range of VM ids.
type VMIDRange struct{ Start, End int }

// Size is how many ids the range holds.
func (r VMIDRange) Size() int { return r.End - r.Start + 1 }

func buildVMIDRange(p *problems, start, end *int) VMIDRange {
	r := VMIDRange{Start: DefaultVMIDStart}
	if start != nil {
		r.Start = *start
	}

	r.End = min(r.Start+DefaultVMIDSize-1, maxVMID)
	if end != nil {
		r.End = *end
	}

	switch {
	case r.Start < 100 || r.Start > maxVMID:
		p.errorf("vmIdRange.start", "%d is not a Proxmox VM id; use 100 to 999999999", r.Start)
	case r.End < r.Start || r.End > maxVMID:
		p.errorf("vmIdRange.end", "%d is not a VM id from vmIdRange.start (%d) to 999999999; use one in that range", r.End, r.Start)
	}

	return r
}

// checkVMIDRoom reports a range too small for the nodes that take their id from it.
func checkVMIDRoom(p *problems, c *Cluster) {
	need := 0
	for _, n := range c.Nodes {
		if n.VMID == 0 {
			need++
		}
	}

	if c.VMIDs.End >= c.VMIDs.Start && need > c.VMIDs.Size() {
		p.errorf("vmIdRange", "holds %d ids (%d to %d), fewer than the %d nodes without vmId; widen it", c.VMIDs.Size(), c.VMIDs.Start, c.VMIDs.End, need)
	}
}
