package talosstandin

import (
	"context"
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
)

var applyModes = map[string]machineapi.ApplyConfigurationRequest_Mode{
	"auto":      machineapi.ApplyConfigurationRequest_AUTO,
	"reboot":    machineapi.ApplyConfigurationRequest_REBOOT,
	"no_reboot": machineapi.ApplyConfigurationRequest_NO_REBOOT,
	"staged":    machineapi.ApplyConfigurationRequest_STAGED,
}

// applyConfiguration implements ConfigurationApply create and update: patch the input
// configuration, then apply it to the node, retrying every error but InvalidArgument until the
// timeout — first over the insecure maintenance API if the node answers there, else over mTLS.
func applyConfiguration(ctx context.Context, inputs property.Map, engineTimeout float64, op string) (property.Map, error) {
	mode := firstNonEmpty(str(inputs, "applyMode"), "auto")
	apiMode, ok := applyModes[mode]
	if !ok {
		return property.Map{}, fmt.Errorf("applyMode %q: must be one of auto, reboot, no_reboot, staged", mode)
	}

	cfg := str(inputs, "machineConfigurationInput")
	if patches := strings_(inputs.Get("configPatches")); len(patches) > 0 {
		loaded, err := configpatcher.LoadPatches(patches)
		if err != nil {
			return property.Map{}, fmt.Errorf("error parsing config patch: %w", err)
		}

		out, err := configpatcher.Apply(configpatcher.WithBytes([]byte(cfg)), loaded)
		if err != nil {
			return property.Map{}, fmt.Errorf("error applying config patches: %w", err)
		}

		b, err := out.Bytes()
		if err != nil {
			return property.Map{}, err
		}

		cfg = string(b)
	}

	node, endpoint, creds, err := target(inputs)
	if err != nil {
		return property.Map{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, timeout(inputs, op, engineTimeout))
	defer cancel()

	err = retry(ctx, "applying the machine configuration to "+node, func(ctx context.Context) error {
		return talosClientOp(ctx, endpoint, node, creds, func(ctx context.Context, c *client.Client) error {
			_, err := c.ApplyConfiguration(ctx, &machineapi.ApplyConfigurationRequest{Data: []byte(cfg), Mode: apiMode})
			return err
		})
	})
	if err != nil {
		return property.Map{}, err
	}

	return withOutputs(inputs, map[string]property.Value{
		"applyMode":            property.New(mode),
		"endpoint":             property.New(endpoint),
		"machineConfiguration": property.New(cfg).WithSecret(true),
		"resolvedApplyMode":    property.New(mode),
	}), nil
}

// resetOnDestroy implements ConfigurationApply delete: a reset only when onDestroy.reset is set.
func resetOnDestroy(ctx context.Context, props property.Map, engineTimeout float64) error {
	if !nestedBool(props, "onDestroy", "reset") {
		return nil
	}

	node, endpoint, creds, err := target(props)
	if err != nil {
		return err
	}
	graceful := !props.Get("onDestroy").IsMap() || !props.Get("onDestroy").AsMap().Get("graceful").IsBool() ||
		props.Get("onDestroy").AsMap().Get("graceful").AsBool()
	reboot := nestedBool(props, "onDestroy", "reboot")

	ctx, cancel := context.WithTimeout(ctx, timeout(props, "delete", engineTimeout))
	defer cancel()

	return retry(ctx, "resetting "+node, func(ctx context.Context) error {
		c, err := secureClient(ctx, endpoint, creds)
		if err != nil {
			return err
		}
		defer c.Close() //nolint:errcheck

		return c.Reset(client.WithNode(ctx, node), graceful, reboot)
	})
}

func nestedBool(m property.Map, path ...string) bool {
	v := property.New(m)
	for _, k := range path {
		if !v.IsMap() {
			return false
		}

		v = v.AsMap().Get(k)
	}

	return v.IsBool() && v.AsBool()
}

// withOutputs returns the inputs plus computed outputs.
func withOutputs(inputs property.Map, outputs map[string]property.Value) property.Map {
	all := map[string]property.Value{}
	for k, v := range inputs.All {
		all[k] = v
	}

	for k, v := range outputs {
		all[k] = v
	}

	return property.NewMap(all)
}
