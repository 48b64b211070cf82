package provider

import (
	"os"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// nodeConfigs returns each node's configuration patches, by hostname, from the recorded
// getConfiguration invokes.
func nodeConfigs(r *recorder) map[string][]string {
	configs := map[string][]string{}

	for _, inv := range r.invokes {
		if inv.Token != "talos:machine/getConfiguration:getConfiguration" {
			continue
		}

		var patches []string
		for _, v := range inv.Args.Get("configPatches").AsArray().All {
			patches = append(patches, v.AsString())
		}

		host := ""
		if i := strings.Index(patches[0], "hostname: "); i >= 0 {
			host = strings.Fields(patches[0][i+len("hostname: "):])[0]
		}

		configs[host] = patches
	}

	return configs
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

	configs := nodeConfigs(r)
	if len(configs) != 5 {
		t.Fatalf("configurations for %d nodes", len(configs))
	}

	var first string

	for _, host := range []string{"cp-1", "cp-2", "cp-3"} {
		patches := configs[host]

		var doc struct {
			Cluster struct {
				InlineManifests []struct{ Name, Contents string } `yaml:"inlineManifests"`
			}
		}

		if err := yaml.Unmarshal([]byte(patches[1]), &doc); err != nil {
			t.Fatal(err)
		}

		var names []string
		for _, m := range doc.Cluster.InlineManifests {
			names = append(names, m.Name)
		}

		if strings.Join(names, ",") != "helm-cilium,helm-cilium-copy,l2-policy" {
			t.Errorf("%s inline manifests = %v, want the Helm releases first, then the user's", host, names)
		}

		if first == "" {
			first = patches[1]

			cil := doc.Cluster.InlineManifests[0].Contents
			if !strings.Contains(cil, "name: hubble-relay") || !strings.Contains(cil, "value: \"7445\"") {
				t.Error("helm-cilium lacks the user's value (hubble.relay) or the Talos preset (KubePrism port)")
			}

			cp := doc.Cluster.InlineManifests[1].Contents
			if !strings.HasPrefix(cp, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: networking\n") {
				t.Errorf("helm-cilium-copy does not create its namespace first:\n%.200s", cp)
			}
		} else if patches[1] != first {
			t.Errorf("%s carries different manifests than cp-1", host)
		}
	}

	for host, patches := range configs {
		all := strings.Join(patches, "\n")
		if strings.HasPrefix(host, "worker") && strings.Contains(all, "inlineManifests") {
			t.Errorf("%s (a worker) carries inline manifests", host)
		}

		if !strings.Contains(patches[0], "cni:\n      name: none") || !strings.Contains(patches[0], "proxy:\n    disabled: true") {
			t.Errorf("%s: CNI is not none or kube-proxy is not disabled:\n%s", host, patches[0])
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

	if got := nodeConfigs(again)["cp-2"][1]; got != first {
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

	if cp := nodeConfigs(r)["cp-1"]; len(cp) < 2 || !strings.Contains(cp[1], "name: helm-cilium") || !strings.Contains(cp[0], "cni:\n      name: none") {
		t.Errorf("cilium: {} did not install Cilium: %q", cp)
	}
}
