package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/errtest"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
)

const kubernetesRecordType = "talos-proxmox:lifecycle:KubernetesRecord"

// kubernetesOf is the Kubernetes version everything the component registered says the cluster
// runs: the Kubernetes upgrade's and the health gate's input, and the kubelet image (every node)
// and kube-apiserver image (control planes) of the generated configurations. A mismatch fails the
// test.
func kubernetesOf(t *testing.T, r *recorder) string {
	t.Helper()

	want := r.named("homelab-kubernetes").Inputs.Get("kubernetesVersion").AsString()
	seen := map[string]string{"homelab-health": r.named("homelab-health").Inputs.Get("kubernetesVersion").AsString()}

	for host, cfg := range nodeConfigs(t, r) {
		seen[host+" kubelet"] = cfg.K8sKubeletConfig().Image()
		if strings.HasPrefix(host, "cp-") {
			seen[host+" kube-apiserver"] = cfg.K8sAPIServerConfig().Image()
		}
	}

	if len(seen) != 9 {
		t.Errorf("found %d of 9 places that name the Kubernetes version: %v", len(seen), seen)
	}

	for what, v := range seen {
		if v != want && !strings.HasSuffix(v, ":"+want) {
			t.Errorf("%s says %s, the Kubernetes upgrade %s", what, v, want)
		}
	}

	return want
}

// recordKeeps reports whether the record was registered to keep the version in the state.
func recordKeeps(t *testing.T, r *recorder) bool {
	t.Helper()

	recs := r.ofType(kubernetesRecordType)
	if len(recs) != 1 {
		t.Fatalf("%d Kubernetes version records", len(recs))
	}

	// The name the cluster was created with is always kept.
	if !slices.Contains(recs[0].IgnoreChanges, "clusterName") {
		t.Errorf("the record does not keep the cluster's name: ignoreChanges %v", recs[0].IgnoreChanges)
	}

	return slices.Contains(recs[0].IgnoreChanges, "kubernetesVersion")
}

// TestKubernetesVersionRecord: with kubernetesVersion unset a new cluster records the default of
// its Talos minor and runs it; a running cluster runs what its record holds, whatever Talos minor
// it moves to (no silent Kubernetes upgrade: the configurations, the Kubernetes upgrade and the
// health gate all say the recorded version), at preview and at up; a declared kubernetesVersion
// is what runs and what is recorded.
func TestKubernetesVersionRecord(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name, talos, declared, recorded string
		running                         bool
		want                            string
		keeps                           bool
	}{
		{"new cluster", "v1.12.4", "", "", false, "v1.35.0", false},
		// A record left by a first up that failed before any VM is overwritten.
		{"new cluster with a stale record", "v1.12.4", "", "v1.34.1", false, "v1.35.0", false},
		{"running cluster, Talos minor upgrade", "v1.12.4", "", "v1.34.1", true, "v1.34.1", true},
		{"running cluster, two Talos minors later", "v1.13.9", "", "v1.34.1", true, "v1.34.1", true},
		// A cluster created before the record: recorded now, with what it was given until now.
		{"running cluster without a record", "v1.12.4", "", "", true, "v1.35.0", true},
		{"running cluster, kubernetesVersion set", "v1.12.4", "v1.35.0", "v1.34.1", true, "v1.35.0", false},
		{"new cluster, kubernetesVersion set", "v1.12.4", "v1.33.5", "", false, "v1.33.5", false},
	} {
		for _, preview := range []bool{false, true} {
			r := &recorder{recordedKubernetes: tc.recorded}
			if tc.running {
				r.proxmox = runningHomelab()
			}

			in := inputsFromJSON(t, homelabJSON).Set("talosVersion", property.New(tc.talos))
			if tc.declared != "" {
				in = in.Set("kubernetesVersion", property.New(tc.declared))
			}

			if _, err := constructAs(t, r, "homelab", in, preview); err != nil {
				t.Fatalf("%s (preview %v): %v", tc.name, preview, err)
			}

			if got := kubernetesOf(t, r); got != tc.want {
				t.Errorf("%s (preview %v): the cluster runs %s, want %s", tc.name, preview, got, tc.want)
			}

			// Kept, the record's input counts only when there is no record in the state yet;
			// otherwise it is what the record becomes.
			if keeps := recordKeeps(t, r); keeps != tc.keeps {
				t.Errorf("%s (preview %v): the record keeps the state's version: %v, want %v", tc.name, preview, keeps, tc.keeps)
			} else if got := r.named("homelab-kubernetes-version").Inputs.Get("kubernetesVersion").AsString(); !keeps && got != tc.want {
				t.Errorf("%s (preview %v): the record is given %s, want %s", tc.name, preview, got, tc.want)
			}

			if rec := r.named("homelab-kubernetes-version"); rec.Provider == "" || !strings.Contains(rec.Provider, "homelab-lifecycle") {
				t.Errorf("%s: the record's provider is %q, want the lifecycle provider", tc.name, rec.Provider)
			}
		}
	}
}

// TestTalosVersionThatDoesNotRunTheRecordedKubernetes: a Talos version whose minor does not run
// the Kubernetes version the cluster recorded is refused, at preview and at up, naming
// talosVersion and the way out, before any VM or node is touched.
func TestTalosVersionThatDoesNotRunTheRecordedKubernetes(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name, talos, recorded string
		want                  []string
	}{
		{"too old for the new Talos", "v1.14.1", "v1.31.4", []string{
			"talosVersion: Talos v1.14 does not support Kubernetes v1.31.4, which this cluster runs (Talos v1.14 runs v1.32 to v1.37)",
			"set kubernetesVersion to v1.32.x or newer first", "keep talosVersion on a Talos minor that runs v1.31 (v1.10 to v1.13)",
		}},
		{"too new for an older Talos", "v1.10.8", "v1.34.1", []string{
			"talosVersion: Talos v1.10 does not support Kubernetes v1.34.1, which this cluster runs",
			"never downgraded", "keep talosVersion on a Talos minor that runs v1.34 (v1.11 to v1.14)",
		}},
	} {
		for _, preview := range []bool{false, true} {
			// The cluster was created on Talos v1.10, so it keeps that contract.
			r := &recorder{recordedKubernetes: tc.recorded, proxmox: runningHomelab()}
			in := inputsFromJSON(t, homelabJSON).Set("talosVersion", property.New(tc.talos)).Set("configContract", property.New("v1.10"))

			_, err := constructAs(t, r, "homelab", in, preview)
			if !errtest.Says(t, fmt.Sprintf("%s (preview %v)", tc.name, preview), err, tc.want...) {
				t.FailNow()
			}

			for _, typ := range []string{"proxmoxve:VM/virtualMachine:VirtualMachine", "talos-proxmox:lifecycle:NodeUpgrade", "talos-proxmox:lifecycle:KubernetesUpgrade"} {
				if regs := r.ofType(typ); len(regs) != 0 {
					t.Errorf("%s (preview %v): %d %s registered", tc.name, preview, len(regs), typ)
				}
			}
		}
	}
}

// TestChartsRenderForTheRecordedKubernetes: the charts render for the Kubernetes version the
// cluster runs. A local chart that requires Kubernetes below v1.35 renders on a running cluster
// that recorded v1.34.1 and moved to Talos v1.12 (whose default is v1.35.0), for v1.34.1; on a
// new cluster it is refused; a chart that is missing is refused before anything is registered,
// whatever the version.
func TestChartsRenderForTheRecordedKubernetes(t *testing.T) {
	t.Setenv(helmrender.CacheEnv, t.TempDir())

	dir := filepath.Join(t.TempDir(), "bounded")
	for name, text := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: bounded\nversion: 0.1.0\nkubeVersion: \"<1.35.0-0\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube\ndata:\n  version: {{ .Capabilities.KubeVersion.Version | quote }}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}

		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	inputs := func(chart string) property.Map {
		return inputsFromJSON(t, homelabJSON).Set("talosVersion", property.New("v1.12.4")).
			Set("helmCharts", property.New([]property.Value{property.New(map[string]property.Value{
				"name": property.New("bounded"), "chart": property.New(chart), "namespace": property.New("default"),
			})}))
	}

	for _, preview := range []bool{false, true} {
		r := &recorder{recordedKubernetes: "v1.34.1", proxmox: runningHomelab()}
		if _, err := constructAs(t, r, "homelab", inputs(dir), preview); err != nil {
			t.Fatalf("running cluster on v1.34.1 (preview %v): %v", preview, err)
		}

		names, contents := manifestsOf(nodeConfigs(t, r)["cp-1"])
		if i := slices.Index(names, "helm-bounded"); i < 0 || !strings.Contains(contents[i], `version: "v1.34.1"`) {
			t.Errorf("preview %v: the chart did not render for v1.34.1: %v %v", preview, names, contents)
		}

		r = &recorder{}
		if _, err := constructAs(t, r, "homelab", inputs(dir), preview); err == nil || !strings.Contains(err.Error(), "helmCharts[0]") {
			t.Errorf("new cluster on v1.35.0 (preview %v): want the chart refused, got %v", preview, err)
		}

		r = &recorder{recordedKubernetes: "v1.34.1", proxmox: runningHomelab()}
		if _, err := constructAs(t, r, "homelab", inputs(dir+"-missing"), preview); err == nil || !strings.Contains(err.Error(), "helmCharts[0]") {
			t.Errorf("missing chart (preview %v): want it refused, got %v", preview, err)
		}

		if regs := r.custom(); len(regs) != 0 {
			t.Errorf("missing chart (preview %v): %d resources registered before the chart was refused", preview, len(regs))
		}
	}
}
