package provider

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// nodeConfigs returns each node's machine configuration, generated in-process by the component
// (Talos' generation, the component's patches, the user's), by hostname, from the configuration
// applies it registered.
func nodeConfigs(t *testing.T, r *recorder) map[string]config.Provider {
	t.Helper()

	configs := map[string]config.Provider{}

	for _, reg := range r.ofType("talos:machine/configurationApply:ConfigurationApply") {
		text := reg.Inputs.Get("machineConfigurationInput").AsString()

		cfg, err := configloader.NewFromBytes([]byte(text))
		if err != nil {
			t.Fatalf("%s: the configuration does not load: %v", reg.Name, err)
		}

		configs[cfg.NetworkHostnameConfig().Hostname()] = cfg
	}

	return configs
}

// manifestsOf are the names and contents of a configuration's inline manifests, in order.
func manifestsOf(cfg config.Provider) (names, contents []string) {
	for _, m := range cfg.K8sInlineManifestConfigs() {
		names = append(names, m.Name())
		contents = append(contents, m.Contents())
	}

	return names, contents
}

// ciliumReady reports whether a configuration leaves the CNI to Cilium: no flannel, no kube-proxy.
func ciliumReady(cfg config.Provider) bool {
	return cfg.K8sFlannelCNIConfig() == nil && !cfg.K8sProxyConfig().Enabled()
}

// TestConstructWithCiliumAndCharts renders Cilium from a chart repository and a second release
// from an OCI registry (both on loopback) through Construct: each becomes an inline manifest
// `helm-<release>` on every control plane, identical, before the user's inline manifests; no
// worker gets them; every node has CNI none and kube-proxy off.
func TestConstructWithCiliumAndCharts(t *testing.T) {
	t.Setenv(helmrender.CacheEnv, t.TempDir())

	archive := helmtest.CiliumArchive(t)
	repo := helmtest.Repository(t, archive)
	reg := helmtest.Registry(t, archive)

	inputs := inputsFromJSON(t, homelabJSON).
		Set("cilium", property.New(map[string]property.Value{
			"repository": property.New(repo.URL),
			"values":     property.New(map[string]property.Value{"hubble": property.New(map[string]property.Value{"relay": property.New(map[string]property.Value{"enabled": property.New(true)})})}),
		})).
		Set("helmCharts", property.New([]property.Value{property.New(map[string]property.Value{
			"name":       property.New("cilium-copy"),
			"chart":      property.New("cilium"),
			"repository": property.New(reg.URL),
			"version":    property.New(helmtest.CiliumVersion),
			"namespace":  property.New("networking"),
			"valuesYaml": property.New("hubble:\n  tls:\n    auto:\n      method: cronJob\n"),
		})}))

	r := &recorder{}

	resp, err := construct(t, r, "homelab", inputs)
	if err != nil {
		t.Fatal(err)
	}

	rels := resp.State.Get("helmReleases").AsMap()
	cil := rels.Get("cilium").AsMap()

	if rels.Len() != 2 || cil.Get("chart").AsString() != "cilium" || cil.Get("version").AsString() != "1.18.0" ||
		cil.Get("namespace").AsString() != "kube-system" || !strings.HasPrefix(cil.Get("digest").AsString(), "sha256:") ||
		len(cil.Get("manifestSha256").AsString()) != 64 || cil.Get("objects").AsNumber() < 20 || cil.Get("bytes").AsNumber() < 50000 {
		t.Errorf("helmReleases = %v", rels)
	}

	if ns := rels.Get("cilium-copy").AsMap().Get("namespace").AsString(); ns != "networking" {
		t.Errorf("helmReleases.cilium-copy.namespace = %q", ns)
	}

	configs := nodeConfigs(t, r)
	if len(configs) != 5 {
		t.Fatalf("configurations for %d nodes", len(configs))
	}

	var first []string

	for _, host := range []string{"cp-1", "cp-2", "cp-3"} {
		names, contents := manifestsOf(configs[host])

		if strings.Join(names, ",") != "helm-cilium,helm-cilium-copy,l2-policy" {
			t.Errorf("%s inline manifests = %v, want the Helm releases first, then the user's", host, names)
		}

		if first == nil {
			first = contents

			if cil := contents[0]; !strings.Contains(cil, "name: hubble-relay") || !strings.Contains(cil, "value: \"7445\"") {
				t.Error("helm-cilium lacks the user's value (hubble.relay) or the Talos preset (KubePrism port)")
			}

			if cp := contents[1]; !strings.HasPrefix(cp, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: networking\n") {
				t.Errorf("helm-cilium-copy does not create its namespace first:\n%.200s", cp)
			}
		} else if !slices.Equal(contents, first) {
			t.Errorf("%s carries different manifests than cp-1", host)
		}
	}

	for host, cfg := range configs {
		if names, _ := manifestsOf(cfg); strings.HasPrefix(host, "worker") && len(names) > 0 {
			t.Errorf("%s (a worker) carries inline manifests %v", host, names)
		}

		if !ciliumReady(cfg) {
			t.Errorf("%s: flannel or kube-proxy is still enabled", host)
		}
	}

	// Construct again, with the servers gone: the cache serves both charts, and the manifests
	// are byte-identical, so a second `pulumi up` sees no change.
	_ = repo.Close()
	_ = reg.Close()

	again := &recorder{}
	if _, err := construct(t, again, "homelab", inputs); err != nil {
		t.Fatalf("second construct with the chart servers stopped: %v", err)
	}

	if _, got := manifestsOf(nodeConfigs(t, again)["cp-2"]); !slices.Equal(got, first) {
		t.Error("the second construct rendered different manifests")
	}
}

func TestConstructHelmFailureRegistersNothing(t *testing.T) {
	t.Setenv(helmrender.CacheEnv, t.TempDir())

	repo := helmtest.Repository(t, helmtest.CiliumArchive(t))

	inputs := inputsFromJSON(t, homelabJSON).Set("cilium", property.New(map[string]property.Value{
		"repository": property.New(repo.URL),
		"values":     property.New(map[string]property.Value{"hubble": property.New(map[string]property.Value{"tls": property.New(map[string]property.Value{"auto": property.New(map[string]property.Value{"method": property.New("helm")})})})}),
	}))

	// Two failing releases and a bad input elsewhere: one error reports all three.
	inputs = inputs.Set("helmCharts", property.New([]property.Value{property.New(map[string]property.Value{
		"name": property.New("missing"), "chart": property.New("./no-such-chart"),
	})})).Set("clusterName", property.New("Bad_Name"))

	r := &recorder{}

	_, err := construct(t, r, "homelab", inputs)
	if err == nil {
		t.Fatal("no error")
	}

	for _, want := range []string{
		"\n  - clusterName:", "\n  - cilium: chart cilium 1.18.0 renders differently every time", "\n  - helmCharts[0]:",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q is not reported:\n%v", want, err)
		}
	}

	if len(r.custom()) != 0 {
		t.Errorf("registered %d resources", len(r.custom()))
	}
}

// TestEmptyCiliumUsesTheDefaultsFromTheCache: `cilium: {}` installs Cilium 1.18.0 from
// https://helm.cilium.io; with that archive already in the cache, no network is needed.
func TestEmptyCiliumUsesTheDefaultsFromTheCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(helmrender.CacheEnv, dir)

	data, err := os.ReadFile(helmtest.CiliumArchive(t))
	if err != nil {
		t.Fatal(err)
	}

	src := helmrender.Source{Chart: "cilium", Repository: spec.DefaultCiliumRepository, Version: spec.DefaultCiliumVersion}
	if _, err := helmrender.NewCache(dir).Store(src, data); err != nil {
		t.Fatal(err)
	}

	r := &recorder{}
	if _, err := construct(t, r, "homelab", inputsFromJSON(t, homelabJSON).Set("cilium", property.New(property.Map{}))); err != nil {
		t.Fatal(err)
	}

	if cp := nodeConfigs(t, r)["cp-1"]; !ciliumReady(cp) {
		t.Error("cilium: {} left flannel or kube-proxy on")
	} else if names, _ := manifestsOf(cp); !slices.Contains(names, "helm-cilium") {
		t.Errorf("cilium: {} did not install Cilium: manifests %v", names)
	}
}
