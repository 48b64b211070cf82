package day2

import (
	"context"
	"fmt"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/go-kubernetes/kubernetes/upgrade"
	"github.com/siderolabs/talos/pkg/machinery/client"
)

// preChecks are upgrade-k8s' own (go-kubernetes' upgrade.Checks): flags, admission plugins and
// feature gates the new version removed, read from each node's static pods and kubelet spec, and
// API resource versions it removed that the cluster still stores. Nothing is changed before they pass.
func (o KubernetesUpgradeOptions) preChecks(ctx context.Context) error {
	if o.From == "" {
		return nil
	}

	path, err := upgrade.NewPath(o.From, o.To)
	if err != nil {
		return err
	}

	rc, err := o.Access.RESTConfig()
	if err != nil {
		return err
	}

	var clients []*client.Client

	defer func() {
		for _, c := range clients {
			c.Close() //nolint:errcheck
		}
	}()

	stateOf := func(ctx context.Context, node string) (state.State, error) {
		c, err := o.Access.Talos(ctx, node)
		if err != nil {
			return nil, err
		}

		clients = append(clients, c)

		return c.COSI, nil
	}

	checks, err := upgrade.NewChecksWithStateProvider(path, stateOf, rc, addresses(o.ControlPlanes), addresses(o.Workers),
		func(format string, args ...any) { o.Progress.say(format, args...) })
	if err != nil {
		return err
	}

	if err := checks.Run(ctx); err != nil {
		return fmt.Errorf("the cluster uses what Kubernetes %s removed; nothing was changed: %w", o.To, err)
	}

	return nil
}

func addresses(nodes []Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Address
	}

	return out
}
