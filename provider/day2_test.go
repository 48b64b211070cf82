package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/lifecycle"
)

// runningHomelab is the Proxmox inventory of the homelab cluster once it runs: every node's VM.
func runningHomelab() *mockInventory {
	inv := labInventory()
	for i, n := range []string{"cp-1", "cp-2", "cp-3", "worker-1", "worker-2"} {
		inv.VMs = append(inv.VMs, map[string]any{"vmId": 111 + i, "name": n, "nodeName": "pve1", "tags": []string{"homelab", "talos"}})
	}

	return inv
}

// The upgrades of a running cluster are chained so the engine runs control planes one at a
// time, then workers upgrade.maxParallel at a time, and the health gate after all of them; the
// outputs come through the gate. A new cluster's records (creates that only read the nodes) go at
// once, the control planes' upgrades still one at a time.
func TestConstructRollingUpgradeOrder(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name        string
		maxParallel string
		running     bool
		// want maps each node's upgrade to the upgrades it must wait for; configs each node's
		// configuration to the configurations it must wait for.
		want, configs map[string][]string
	}{
		{"one at a time", "", true, map[string][]string{
			"cp-1": nil, "cp-2": {"cp-1"}, "cp-3": {"cp-2"}, "worker-1": {"cp-3"}, "worker-2": {"cp-3", "worker-1"},
		}, nil},
		{"two workers at once", `"upgrade": {"maxParallel": 2},`, true, map[string][]string{
			"cp-1": nil, "cp-2": {"cp-1"}, "cp-3": {"cp-2"}, "worker-1": {"cp-3"}, "worker-2": {"cp-3"},
		}, nil},
		{"new cluster", "", false, map[string][]string{
			"cp-1": nil, "cp-2": {"cp-1"}, "cp-3": {"cp-2"}, "worker-1": nil, "worker-2": nil,
		}, map[string][]string{"cp-1": nil, "cp-2": nil, "cp-3": nil, "worker-1": nil, "worker-2": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			r := &recorder{}
			if tc.running {
				r.proxmox = runningHomelab()
			}
			in := strings.Replace(homelabJSON, "{", "{"+tc.maxParallel, 1)

			if _, err := construct(t, r, "homelab", inputsFromJSON(t, in)); err != nil {
				t.Fatal(err)
			}

			for node, wantDeps := range tc.want {
				u := r.named("homelab-" + node + "-upgrade")

				if got := stepsWaitedFor(u, "-upgrade"); !slices.Equal(got, wantDeps) {
					t.Errorf("%s's upgrade waits for the upgrades of %v, want %v", node, got, wantDeps)
				}

				for _, dep := range []string{"homelab-" + node + "-config", "homelab-bootstrap", "homelab-kubeconfig"} {
					if !slices.ContainsFunc(u.Dependencies, func(d string) bool { return strings.HasSuffix(d, "::"+dep) }) {
						t.Errorf("%s's upgrade does not wait for %s", node, dep)
					}
				}

				if !strings.HasPrefix(u.Provider, "urn:pulumi:stack::project::"+ClusterToken+"$pulumi:providers:talos-proxmox::homelab-lifecycle::") {
					t.Errorf("%s's upgrade uses provider %q, want the component's own talos-proxmox provider", node, u.Provider)
				}

				if !slices.ContainsFunc(u.ReplaceWith, func(d string) bool { return strings.HasSuffix(d, "::homelab-"+node) }) {
					t.Errorf("%s's upgrade is not replaced with its VM: %v", node, u.ReplaceWith)
				}

				if v := u.Inputs.Get("installerImage").AsString(); !strings.HasSuffix(v, ":v1.11.5") {
					t.Errorf("%s's installer image = %s", node, v)
				}
			}

			if p := r.named("homelab-lifecycle"); p.Version != Version {
				t.Errorf("the talos-proxmox provider asks for plugin version %q, want %q", p.Version, Version)
			}

			h := r.named("homelab-health")
			for node := range tc.want {
				if !slices.ContainsFunc(h.Dependencies, func(d string) bool { return strings.HasSuffix(d, "::homelab-"+node+"-upgrade") }) {
					t.Errorf("the health gate does not wait for %s's upgrade", node)
				}
			}

			if tc.configs == nil {
				tc.configs = tc.want
			}

			checkReconfigureOrder(t, r, tc.configs, tc.running)
		})
	}
}

// After the upgrades: the Kubernetes upgrade, then the running nodes' configurations in the
// upgrades' order (a new cluster's configuration records at once, without waiting for the
// Kubernetes record); the Talos provider's apply configures a new node only.
func checkReconfigureOrder(t *testing.T, r *recorder, want map[string][]string, running bool) {
	t.Helper()

	has := func(deps []string, name string) bool {
		return slices.ContainsFunc(deps, func(d string) bool { return strings.HasSuffix(d, "::"+name) })
	}

	k := r.named("homelab-kubernetes")
	if k.Type != lifecycle.KubernetesUpgradeKind.Token {
		t.Fatalf("homelab-kubernetes is a %s", k.Type)
	}

	if v := k.Inputs.Get("kubernetesVersion").AsString(); !strings.HasPrefix(v, "v1.") {
		t.Errorf("the Kubernetes upgrade is for version %q", v)
	}

	m := r.named("homelab-membership")
	if !has(m.Dependencies, "homelab-kubernetes") {
		t.Error("the membership (and so the health gate) does not wait for the Kubernetes upgrade")
	}

	for node, wantDeps := range want {
		if !has(k.Dependencies, "homelab-"+node+"-upgrade") {
			t.Errorf("the Kubernetes upgrade does not wait for %s's OS upgrade", node)
		}

		c := r.named("homelab-" + node + "-node-config")

		if got := stepsWaitedFor(c, "-node-config"); !slices.Equal(got, wantDeps) {
			t.Errorf("%s's configuration waits for those of %v, want %v", node, got, wantDeps)
		}

		if has(c.Dependencies, "homelab-kubernetes") != running || !has(c.Dependencies, "homelab-"+node+"-config") {
			t.Errorf("%s's configuration waits for the Kubernetes upgrade: %v (want %v), and for its first apply: %v", node,
				has(c.Dependencies, "homelab-kubernetes"), running, c.Dependencies)
		}

		if !c.Inputs.Get("configuration").Secret() {
			t.Errorf("%s's running configuration is not secret", node)
		}

		if !has(m.Dependencies, "homelab-"+node+"-node-config") {
			t.Errorf("the membership does not wait for %s's configuration", node)
		}

		if apply := r.named("homelab-" + node + "-config"); !slices.Contains(apply.IgnoreChanges, "machineConfigurationInput") {
			t.Errorf("%s's ConfigurationApply re-applies changed configurations itself (ignoreChanges %v)", node, apply.IgnoreChanges)
		}
	}
}

// The manifest sync runs after the health gate with the same manifests as the control planes'
// inlineManifests (the Helm releases, then the inline manifests), and it is not registered when
// manifestSync.enabled is false.
func TestConstructManifestSync(t *testing.T) {
	t.Parallel()

	repo := helmtest.Repository(t, helmtest.CiliumArchive(t))
	in := strings.Replace(homelabJSON, "{", `{"cilium": {"version": "`+helmtest.CiliumVersion+`", "repository": "`+repo.URL+`"},
		"manifestSync": {"pruneCrdsAndNamespaces": true, "timeout": "2m"},`, 1)

	r := &recorder{}
	if _, err := construct(t, r, "homelab", inputsFromJSON(t, in)); err != nil {
		t.Fatal(err)
	}

	s := r.named("homelab-manifests")
	if !slices.ContainsFunc(s.Dependencies, func(d string) bool { return strings.HasSuffix(d, "::homelab-health") }) {
		t.Errorf("the sync does not wait for the health gate: %v", s.Dependencies)
	}

	var names []string
	for k := range s.Inputs.Get("manifests").AsMap().AsMap() {
		names = append(names, k)
	}

	slices.Sort(names)

	if !slices.Equal(names, []string{"helm-cilium", "l2-policy"}) {
		t.Errorf("the sync's manifests are %v, want the Cilium release and the inline manifest", names)
	}

	if !s.Inputs.Get("pruneCrdsAndNamespaces").AsBool() || s.Inputs.Get("timeout").AsString() != "2m0s" {
		t.Errorf("the sync's settings are not passed on: %v", s.Inputs)
	}

	off := &recorder{}
	if _, err := construct(t, off, "homelab", inputsFromJSON(t, strings.Replace(homelabJSON, "{", `{"manifestSync": {"enabled": false},`, 1))); err != nil {
		t.Fatal(err)
	}

	for _, reg := range off.custom() {
		if reg.Type == lifecycle.ManifestSyncKind.Token {
			t.Error("the sync is registered with manifestSync.enabled false")
		}
	}
}

// An extra manifest with a namespace is the sync's alone: Talos' configuration keeps only the
// other URLs, and the sync gets every URL and the namespaces.
func TestConstructNamespacedExtraManifest(t *testing.T) {
	t.Parallel()

	const plain, argo = "https://example.com/plain.yaml", "https://example.com/argocd/install.yaml"

	in := strings.Replace(homelabJSON, "{", `{"extraManifests": ["`+plain+`", "`+argo+`"],
		"extraManifestNamespaces": {"`+argo+`": "argocd"},`, 1)

	r := &recorder{}
	if _, err := construct(t, r, "homelab", inputsFromJSON(t, in)); err != nil {
		t.Fatal(err)
	}

	cfg := r.named("homelab-cp-1-config").Inputs.Get("machineConfigurationInput").AsString()
	if !strings.Contains(cfg, plain) || strings.Contains(cfg, argo) {
		t.Errorf("cp-1's configuration should list %s and not %s:\n%s", plain, argo, cfg)
	}

	s := r.named("homelab-manifests")

	var urls []string
	for _, v := range s.Inputs.Get("extraManifests").AsArray().AsSlice() {
		urls = append(urls, v.AsString())
	}

	if !slices.Equal(urls, []string{plain, argo}) {
		t.Errorf("the sync's extra manifests are %v", urls)
	}

	if ns := s.Inputs.Get("namespaces").AsMap().Get(argo).AsString(); ns != "argocd" {
		t.Errorf("the sync's namespace for %s is %q", argo, ns)
	}
}

// stepsWaitedFor are the nodes whose steps of the kind suffix names ("-upgrade") reg depends on,
// sorted.
func stepsWaitedFor(reg registration, suffix string) []string {
	var nodes []string

	for _, d := range reg.Dependencies {
		if name, ok := strings.CutSuffix(d[strings.LastIndex(d, "::")+2:], suffix); ok {
			nodes = append(nodes, strings.TrimPrefix(name, "homelab-"))
		}
	}

	slices.Sort(nodes)

	return nodes
}
