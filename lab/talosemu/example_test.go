package talosemu_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// A control plane's life as the Talos provider drives it: configure it in maintenance mode, then
// bootstrap it over mutual TLS.
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	node, err := talosemu.Start(ctx, talosemu.Options{Address: "127.0.78.1"})
	if err != nil {
		panic(err)
	}
	defer node.Close() //nolint:errcheck

	bundle, err := talosemu.SharedBundle()
	if err != nil {
		panic(err)
	}

	cfg, err := bundle.MachineConfig(machine.TypeControlPlane)
	if err != nil {
		panic(err)
	}

	maintenance, err := client.New(ctx, client.WithEndpoints(node.IP()),
		client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // maintenance mode
	if err != nil {
		panic(err)
	}
	defer maintenance.Close() //nolint:errcheck

	if _, err := maintenance.ApplyConfiguration(ctx, &machineapi.ApplyConfigurationRequest{Data: cfg}); err != nil {
		panic(err)
	}

	if err := node.WaitState(ctx, talosemu.StateInstalled); err != nil {
		panic(err)
	}

	fmt.Println(node.State())

	secure, err := client.New(ctx, client.WithEndpoints(node.IP()), client.WithConfig(bundle.ClientConfig(node.IP())))
	if err != nil {
		panic(err)
	}
	defer secure.Close() //nolint:errcheck

	if err := secure.Bootstrap(client.WithNode(ctx, node.IP()), &machineapi.BootstrapRequest{}); err != nil {
		panic(err)
	}

	// As on Talos, Bootstrap returns at once; etcd (a real embedded member) runs a moment later.
	if err := node.WaitState(ctx, talosemu.StateBootstrapped); err != nil {
		panic(err)
	}

	fmt.Println(node.State())
	// Output:
	// installed
	// bootstrapped
}
