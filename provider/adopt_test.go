package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

func TestContractOf(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{"v1.11.5": "v1.11", "v1.14.0-beta.1": "v1.14", "1.10.3": "v1.10", "": ""} {
		if got := contractOf(in); got != want {
			t.Errorf("contractOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// A node to adopt must be declared with the Secure Boot and disk keys it was installed with.
func TestAdoptedNodeSecurityMustMatch(t *testing.T) {
	t.Parallel()

	c, err := spec.Build(spec.Input{
		ClusterName: "home", TalosVersion: "v1.14.1", Network: spec.NetworkInput{Gateway: "10.0.0.1"},
		Image:          spec.ImageInput{SecureBoot: new(true)},
		DiskEncryption: &spec.DiskEncryptionInput{State: spec.KeyTPM, Ephemeral: spec.KeyNodeID},
		Nodes:          map[string]spec.NodeInput{"cp-1": {HostNode: "pve1", Role: "controlplane", IP: "10.0.0.11"}},
	})
	if err != nil {
		t.Fatal(err)
	}

	match := day2.Security{Known: true, SecureBoot: true, StateKey: "tpm", Ephemeral: "nodeID"}
	if p := securityMismatches(c, map[string]day2.Running{"cp-1": {Security: match}}); len(p) != 0 {
		t.Errorf("a node installed as declared: %v", p)
	}

	plain := day2.Security{Known: true}
	p := securityMismatches(c, map[string]day2.Running{"cp-1": {Security: plain}})

	var got []string
	for _, e := range p {
		got = append(got, strings.SplitN(e.Error(), ":", 2)[0])
	}

	if want := []string{"nodes.cp-1.image.secureBoot", "nodes.cp-1.diskEncryption.state", "nodes.cp-1.diskEncryption.ephemeral"}; !slices.Equal(got, want) {
		t.Errorf("a plain node declared Secure Boot and encrypted: %v, want %v", got, want)
	}

	if p := securityMismatches(c, map[string]day2.Running{"cp-1": {}}); len(p) != 0 {
		t.Errorf("a node that reports no security state: %v", p)
	}
}
