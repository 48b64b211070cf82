package provider

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/yamlexample"
)

// TestYAMLExampleConstructs constructs the YAML example, with Cilium from a chart repository on
// loopback instead of https://helm.cilium.io.
func TestYAMLExampleConstructs(t *testing.T) {
	t.Setenv(helmrender.CacheEnv, t.TempDir())

	repo := helmtest.Repository(t, helmtest.CiliumArchive(t))
	props, err := yamlexample.Load("../examples/yaml/Pulumi.yaml", ClusterToken, map[string]any{"ciliumRepository": repo.URL})
	if err != nil {
		t.Fatal(err)
	}

	text, err := json.Marshal(props)
	if err != nil {
		t.Fatal(err)
	}

	r := &recorder{}
	if _, err := construct(t, r, "homelab", inputsFromJSON(t, string(text))); err != nil {
		t.Fatal(err)
	}

	if n := len(r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine")); n != 5 {
		t.Errorf("%d VMs, want 5", n)
	}

	if n := len(r.ofType("proxmoxve:Download/file:File")); n != 3 {
		t.Errorf("%d downloads, want 3 (three hosts)", n)
	}

	for host, cfg := range nodeConfigs(t, r) {
		names, _ := manifestsOf(cfg)
		hasCilium := slices.Contains(names, "helm-cilium")
		if hasCilium != strings.HasPrefix(host, "cp-") {
			t.Errorf("%s: carries helm-cilium = %v", host, hasCilium)
		}
	}

	var hosts []string
	for _, vm := range r.ofType("proxmoxve:VM/virtualMachine:VirtualMachine") {
		hosts = append(hosts, vm.Inputs.Get("nodeName").AsString())
	}
	slices.Sort(hosts)
	if strings.Join(slices.Compact(hosts), ",") != "pve1,pve2,pve3" {
		t.Errorf("hosts = %v", hosts)
	}
}
