//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/factoryfake"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// talosStandInProgram declares the Talos side of a cluster directly with the talos provider's
// resources, as the component does: secrets → configuration → apply ×3 → bootstrap →
// kubeconfig, plus a schematic registered with the factory and a talosconfig.
const talosStandInProgram = `name: talos-standin
runtime: yaml
plugins:
  providers:
    - name: talos
      path: %[1]s
variables:
  cpConfig:
    fn::invoke:
      function: talos:machine/getConfiguration:getConfiguration
      arguments:
        clusterName: lab
        clusterEndpoint: https://%[3]s:6443
        machineType: controlplane
        machineSecrets: ${secrets.machineSecrets}
        talosVersion: v1.11
        kubernetesVersion: v1.34.1
  talosconfig:
    fn::invoke:
      function: talos:client/getConfiguration:getConfiguration
      arguments:
        clusterName: lab
        clientConfiguration: ${secrets.clientConfiguration}
        endpoints: [%[3]s, %[4]s, %[5]s]
        nodes: [%[3]s, %[4]s, %[5]s]
resources:
  factory:
    type: pulumi:providers:talos
    properties:
      imageFactoryUrl: %[2]s
  schematic:
    type: talos:imageFactory/schematic:Schematic
    properties:
      schematic: |
        customization:
          systemExtensions:
            officialExtensions:
              - siderolabs/qemu-guest-agent
    options:
      provider: ${factory}
  secrets:
    type: talos:machine/secrets:Secrets
    properties:
      talosVersion: v1.11
%[6]s  bootstrap:
    type: talos:machine/bootstrap:Bootstrap
    properties:
      clientConfiguration: ${secrets.clientConfiguration}
      node: %[3]s
    options:
      dependsOn:
        - ${apply-1}
        - ${apply-2}
        - ${apply-3}
  kubeconfig:
    type: talos:cluster/kubeconfig:Kubeconfig
    properties:
      clientConfiguration:
        caCertificate: ${secrets.clientConfiguration.caCertificate}
        clientCertificate: ${secrets.clientConfiguration.clientCertificate}
        clientKey: ${secrets.clientConfiguration.clientKey}
      node: %[3]s
    options:
      dependsOn:
        - ${bootstrap}
outputs:
  schematicId: ${schematic.id}
  kubeconfig: ${kubeconfig.kubeconfigRaw}
  talosconfig: ${talosconfig.talosConfig}
`

const applyResource = `  apply-%[1]d:
    type: talos:machine/configurationApply:ConfigurationApply
    properties:
      clientConfiguration: ${secrets.clientConfiguration}
      machineConfigurationInput: ${cpConfig.machineConfiguration}
      node: %[2]s
      configPatches:
        - "machine:\n  network:\n    hostname: cp-%[1]d\n"
`

// TestTalosStandInThroughTheEngine runs the lab's talos stand-in plugin under the real Pulumi
// CLI against three emulated Talos nodes and the Image Factory stand-in: up, a preview with no
// changes, secrets encrypted in the state, destroy.
func TestTalosStandInThroughTheEngine(t *testing.T) {
	e := newEnv(t)

	labBin := os.Getenv("TALOS_LAB_BIN")
	if labBin == "" {
		t.Fatal("TALOS_LAB_BIN must be set: run `make e2e`")
	}

	factory, err := factoryfake.Start(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer factory.Close() //nolint:errcheck

	cluster := talosemu.NewCluster()
	defer cluster.Close() //nolint:errcheck // removes a temporary directory

	ips := []string{"127.0.5.1", "127.0.5.2", "127.0.5.3"}

	var applies strings.Builder
	for i, ip := range ips {
		n, err := talosemu.Start(t.Context(), talosemu.Options{Address: ip, Cluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close() //nolint:errcheck

		fmt.Fprintf(&applies, applyResource, i+1, ip)
	}

	program := fmt.Sprintf(talosStandInProgram, labBin, factory.URL(), ips[0], ips[1], ips[2], applies.String())
	if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}

	if out, err := e.pulumi("stack", "init", "dev"); err != nil {
		t.Fatalf("stack init: %v\n%s", err, out)
	}

	out, err := e.pulumi("up", "--yes")
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}

	t.Logf("up:\n%s", out)

	if !slices.Contains(factory.Schematics(), "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515") {
		t.Errorf("the schematic was not registered with the factory: %v", factory.Schematics())
	}

	// Bootstrap starts etcd asynchronously and the other control planes then join it, as on Talos.
	for deadline := time.Now().Add(time.Minute); len(cluster.EtcdMembers()) != 3 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}

	if !cluster.Bootstrapped() || len(cluster.EtcdMembers()) != 3 {
		t.Errorf("bootstrapped %v, etcd members %v; want a bootstrapped 3-member cluster", cluster.Bootstrapped(), cluster.EtcdMembers())
	}

	var hostnames []string
	for _, n := range cluster.Nodes() {
		hostnames = append(hostnames, n.Hostname())
	}

	slices.Sort(hostnames)
	if strings.Join(hostnames, ",") != "cp-1,cp-2,cp-3" {
		t.Errorf("node hostnames = %v: the per-node config patches were not applied", hostnames)
	}

	out, err = e.pulumi("stack", "output", "--json", "--show-secrets")
	if err != nil {
		t.Fatalf("stack output: %v\n%s", err, out)
	}

	var outputs struct{ SchematicID, Kubeconfig, Talosconfig string }
	if err := json.Unmarshal([]byte(out), &outputs); err != nil {
		t.Fatal(err)
	}

	if !strings.Contains(outputs.Kubeconfig, "server: https://"+ips[0]+":6443") {
		t.Errorf("kubeconfig does not point at the cluster endpoint:\n%s", outputs.Kubeconfig)
	}

	if !strings.Contains(outputs.Talosconfig, ips[2]) {
		t.Errorf("talosconfig lacks the nodes:\n%s", outputs.Talosconfig)
	}

	if out, err := e.pulumi("preview", "--expect-no-changes"); err != nil {
		t.Errorf("a second preview with unchanged inputs shows changes: %v\n%s", err, out)
	}

	exported, err := e.pulumi("stack", "export")
	if err != nil {
		t.Fatal(err)
	}

	// PEM material is base64 in the talos schema: "-----BEGIN" encodes as "LS0tLS1CRUdJTi".
	for _, plain := range []string{"LS0tLS1CRUdJTi", "BEGIN", "certificate-authority-data", "client-key-data"} {
		if strings.Contains(exported, plain) {
			t.Errorf("the state holds %q in plaintext", plain)
		}
	}

	if out, err := e.pulumi("destroy", "--yes"); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
}
