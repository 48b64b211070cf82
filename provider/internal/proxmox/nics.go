package proxmox

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// clusterNICProblems refuses a running node's first extra network while its cluster NIC has the
// MAC Proxmox chose: on a node with several NICs Talos selects each by MAC, and the derived one
// would re-plug net0 with a new MAC (a DHCP node would lose its lease, and the configuration
// that selects the old one would be gone before the new one applies). The fix is to declare the
// MAC it has, which the message names. Only nodes with several NICs and a derived net0 MAC whose
// VM exists are read (one API call each).
func clusterNICProblems(ctx *pulumi.Context, c *spec.Cluster, inv *Inventory, opts []pulumi.ResourceOption) []error {
	var todo []spec.Node

	for _, n := range c.Nodes {
		if len(n.NICs) > 1 && n.NICs[0].Derived && inv.HasVM(c.Name, n.Name) {
			todo = append(todo, n)
		}
	}

	if len(todo) == 0 {
		return nil
	}

	api, err := pveclient.New(proxmoxCredentials(ctx, opts))
	if err != nil {
		return nil // the calls themselves say what is wrong with the credentials
	}

	var problems []error

	for _, n := range todo {
		v, ok := inv.vmOf(c.Name, n)
		if !ok {
			continue
		}

		cfg, err := api.VMConfig(ctx.Context(), v.NodeName, v.VmId)
		if err != nil {
			problems = append(problems, fmt.Errorf("nodes.%s.networks: reading VM %d's NICs on %s: %w", n.Name, v.VmId, v.NodeName, err))
			continue
		}

		if mac := nicMAC(cfg["net0"]); mac != "" && !strings.EqualFold(mac, n.NICs[0].MACAddress) {
			problems = append(problems, fmt.Errorf("nodes.%s.networks: the VM's cluster NIC (net0) has MAC %s, which Proxmox chose; "+
				"with several networks Talos selects each NIC by its MAC, and the component would give net0 the derived %s, "+
				"re-plugging it (a DHCP node would lose its lease); set macAddress: %q on the cluster network's entry so it keeps it",
				n.Name, mac, n.NICs[0].MACAddress, mac))
		}
	}

	return problems
}
