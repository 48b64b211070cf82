//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// syncCluster: 1 control plane and 1 worker with Cilium from the lab's repository, the lab's
// hello chart twice (releases hello and extra, version 1.0.0) and two inline manifests (the
// second with a Job, an immutable ConfigMap, a Namespace and a CRD).
func syncCluster(l *lab.Lab, extraURL string) string {
	return fmt.Sprintf(`name: sync
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  sync:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: sync
      talosVersion: v1.11.5
      kubernetesVersion: v1.33.5
      vip: %[2]s
      network:
        gateway: %[3]s
      image:
        factoryUrl: ${factoryUrl}
      cilium:
        version: 1.18.0
        repository: %[1]s
        values:
          debug:
            enabled: false
      helmCharts:
        - name: hello
          chart: hello
          version: 1.0.0
          repository: %[1]s
        - name: extra
          chart: hello
          version: 1.0.0
          repository: %[1]s
      extraManifests:
        - %[6]s
      inlineManifests:
        - name: settings
          contents: |
            apiVersion: v1
            kind: Namespace
            metadata:
              name: team-a
            ---
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: settings
              namespace: default
            data:
              color: blue
        - name: batch
          contents: |
            apiVersion: batch/v1
            kind: Job
            metadata:
              name: migrate
              namespace: default
            spec:
              backoffLimit: 0
              template:
                spec:
                  restartPolicy: Never
                  containers:
                    - name: migrate
                      image: registry.k8s.io/pause:3.10
                      args: [schema-1]
            ---
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: frozen
              namespace: default
            immutable: true
            data:
              rev: "1"
            ---
            apiVersion: v1
            kind: Namespace
            metadata:
              name: team-b
            ---
            apiVersion: apiextensions.k8s.io/v1
            kind: CustomResourceDefinition
            metadata:
              name: widgets.lab.example.com
            spec:
              group: lab.example.com
              names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
              scope: Namespaced
              versions:
                - name: v1
                  served: true
                  storage: true
                  schema:
                    openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[4]s}
        worker-1: {hostNode: pve2, role: worker, ip: %[5]s}
outputs:
  kubeconfig: ${sync.kubeconfig}
`, l.Charts.URL, l.Address(10), l.Address(1), l.Address(11), l.Address(21), extraURL)
}

// TestManifestSync: Talos applied the manifests at bootstrap (an extra manifest URL too) and the sync adopts them without a
// change. Then a Cilium value changes, the hello chart moves to 1.1.0 (a ConfigMap changes, one
// is added, a Service dropped), the extra release is removed, the extra manifest's contents
// change behind its URL and a Job's pod template changes: the preview lists exactly that
// per manifest, the up applies it, prunes what was dropped and leaves the rest untouched (same
// resourceVersion), recreates the Job (no manifestSync.force needed), leaves a dropped Namespace
// in place (no opt-in), and the preview after shows no changes. An invalid object fails the next
// up at the dry run, before any object changed. Then manifestSync.force and
// pruneCrdsAndNamespaces (syncForceAndPrune).
func TestManifestSync(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	// An extra manifest served on loopback; its contents change behind the same URL.
	var extra atomic.Value
	extra.Store("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-url, namespace: default}\ndata: {rev: \"1\"}\n")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(extra.Load().(string)))
	}))
	defer srv.Close()

	extraURL := srv.URL + "/extra.yaml"

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 36}, func(l *lab.Lab) string { return syncCluster(l, extraURL) })

	// Talos v1.11 created the objects without an inventory; the first sync adopts them (adds
	// them to the inventory Talos v1.13 and upgrade-k8s use), creates and prunes nothing.
	out := mustRun(t, p, "up", "--yes", "--skip-preview")
	if !strings.Contains(out, "manifests in sync") || !strings.Contains(out, " 0 created, ") || !strings.Contains(out, " 0 pruned") {
		t.Errorf("the first sync did not adopt Talos' bootstrap manifests:\n%s", out)
	}

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	ctx := t.Context()

	for _, name := range []string{"hello-legacy", "extra-legacy"} {
		if _, err := kc.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("Talos did not create Service %s at bootstrap: %v", name, err)
		}
	}

	cm := func(ns, name string) map[string]string {
		t.Helper()

		c, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("ConfigMap %s/%s: %v", ns, name, err)
		}

		return c.Data
	}

	settings, err := kc.CoreV1().ConfigMaps("default").Get(ctx, "settings", metav1.GetOptions{})
	if err != nil || settings.Annotations["config.k8s.io/owning-inventory"] != "talos-bootstrap-manifests-inventory" {
		t.Errorf("the adopted ConfigMap settings is not owned by Talos' inventory: %v %v", err, settings.GetAnnotations())
	}

	untouched := map[string]string{
		"Deployment default/hello":                   resourceVersion(t, kc, "Deployment", "default", "hello"),
		"ServiceAccount kube-system/cilium-operator": resourceVersion(t, kc, "ServiceAccount", "kube-system", "cilium-operator"),
		"ConfigMap default/settings":                 resourceVersion(t, kc, "ConfigMap", "default", "settings"),
	}

	job := objectUID(t, kc, "Job", "default", "migrate")

	if got := cm("default", "from-url")["rev"]; got != "1" {
		t.Errorf("Talos did not apply the extra manifest at bootstrap: rev %q", got)
	}

	extra.Store(strings.Replace(extra.Load().(string), `rev: "1"`, `rev: "2"`, 1))

	editProgram(t, e, "debug:\n            enabled: false", "debug:\n            enabled: true")
	editProgram(t, e, "chart: hello\n          version: 1.0.0", "chart: hello\n          version: 1.1.0")
	editProgram(t, e, "        - name: extra\n          chart: hello\n          version: 1.0.0\n          repository: "+l.Charts.URL+"\n", "")

	editProgram(t, e, "            apiVersion: v1\n            kind: Namespace\n            metadata:\n              name: team-a\n            ---\n", "")

	// A Job's pod template cannot change: the sync recreates the Job, without manifestSync.force.
	editProgram(t, e, "args: [schema-1]", "args: [schema-2]")

	out = mustRun(t, p, "preview", "--diff")
	for _, want := range []string{
		"manifest sync planned: helm-cilium: ", "ConfigMap kube-system/cilium-config",
		"manifest sync planned: helm-hello: 1 added (ConfigMap default/hello-extra); 1 changed (ConfigMap default/hello-config); 1 pruned (Service default/hello-legacy)",
		"manifest sync planned: settings: 1 pruned (Namespace team-a)",
		"manifest sync planned: " + extraURL + ": 1 changed (ConfigMap default/from-url)",
		"manifest sync planned: helm-extra: 3 pruned (ConfigMap default/extra-config, Service default/extra-legacy, Deployment.apps default/extra)",
		"manifest sync planned: batch: 1 changed (Job.batch default/migrate)",
		// Per changed object, the fields the API server's dry run changes.
		`manifest sync planned: ConfigMap default/from-url: .data.rev: "1" → "2"`,
		`manifest sync planned: ConfigMap kube-system/cilium-config: .data.debug: "false" → "true"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the preview does not say %q:\n%s", want, out)
		}
	}

	out = mustRun(t, p, "up", "--yes", "--skip-preview")
	if !strings.Contains(out, "4 pruned; left in place: Namespace team-a") {
		t.Errorf("the up did not prune the 4 dropped objects and leave the Namespace:\n%s", out)
	}

	// A Namespace is deleted only with manifestSync.pruneCrdsAndNamespaces: it stays, untracked.
	if _, err := kc.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{}); err != nil {
		t.Errorf("the dropped Namespace was deleted without the opt-in: %v", err)
	}

	if got := cm("kube-system", "cilium-config")["debug"]; got != "true" {
		t.Errorf("cilium-config debug = %q, want the new value true", got)
	}

	if got := objectUID(t, kc, "Job", "default", "migrate"); got == job {
		t.Errorf("the Job whose pod template changed was not recreated (uid %s)", got)
	} else if j, err := kc.BatchV1().Jobs("default").Get(ctx, "migrate", metav1.GetOptions{}); err != nil || j.Spec.Template.Spec.Containers[0].Args[0] != "schema-2" {
		t.Errorf("the recreated Job does not run the new pod template: %v", err)
	}

	if got := cm("default", "from-url")["rev"]; got != "2" {
		t.Errorf("the extra manifest's new contents were not applied: rev %q", got)
	}

	if got := cm("default", "hello-config")["version"]; got != "1.1.0" {
		t.Errorf("hello-config version = %q, want 1.1.0", got)
	}

	if got := cm("default", "hello-extra")["added"]; got != "1.1.0" {
		t.Errorf("hello-extra = %q, want the object chart 1.1.0 adds", got)
	}

	for _, gone := range []struct{ kind, name string }{
		{"Service", "hello-legacy"}, {"Service", "extra-legacy"}, {"ConfigMap", "extra-config"}, {"Deployment", "extra"},
	} {
		if _, err := getObject(ctx, kc, gone.kind, "default", gone.name); !apierrors.IsNotFound(err) {
			t.Errorf("%s default/%s was not pruned: %v", gone.kind, gone.name, err)
		}
	}

	for what, before := range untouched {
		kind, rest, _ := strings.Cut(what, " ")
		ns, name, _ := strings.Cut(rest, "/")

		if now := resourceVersion(t, kc, kind, ns, name); now != before {
			t.Errorf("%s was touched: resourceVersion %s → %s", what, before, now)
		}
	}

	inv := cm("kube-system", "talos-bootstrap-manifests-inventory")
	if _, ok := inv["default_hello-legacy__Service"]; ok {
		t.Errorf("the pruned Service is still in Talos' inventory: %v", inv)
	}

	if _, ok := inv["_team-a__Namespace"]; ok {
		t.Errorf("the Namespace left in place is still in Talos' inventory (upgrade-k8s would prune it)")
	}

	if _, ok := inv["default_hello-extra__ConfigMap"]; !ok {
		t.Errorf("the added ConfigMap is not in Talos' inventory (talosctl upgrade-k8s would not own it)")
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	// An invalid object (binaryData that is not base64) next to a valid change: the dry run
	// refuses it and nothing changes.
	editProgram(t, e, "              color: blue", "              color: green\n            binaryData:\n              logo: not-base64!")

	out, err = p.Run(ctx, "up", "--yes", "--skip-preview")
	if err == nil || !strings.Contains(out, "the dry run refused the manifests, nothing was changed") {
		t.Errorf("an invalid object did not fail the sync at its dry run: %v\n%s", err, out)
	}

	if got := cm("default", "settings")["color"]; got != "blue" {
		t.Errorf("settings color = %q after the refused sync, want the old blue", got)
	}

	editProgram(t, e, "              color: green\n            binaryData:\n              logo: not-base64!", "              color: blue")

	t.Run("force-and-prune", func(t *testing.T) { syncForceAndPrune(t, e, p, kc) })
}

func resourceVersion(t *testing.T, kc kubernetes.Interface, kind, ns, name string) string {
	t.Helper()

	o, err := getObject(t.Context(), kc, kind, ns, name)
	if err != nil {
		t.Fatalf("%s %s/%s: %v", kind, ns, name, err)
	}

	return o.GetResourceVersion()
}

func getObject(ctx context.Context, kc kubernetes.Interface, kind, ns, name string) (metav1.Object, error) {
	switch kind {
	case "ConfigMap":
		return kc.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	case "Service":
		return kc.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	case "ServiceAccount":
		return kc.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	case "Deployment":
		return kc.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	case "Job":
		return kc.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	case "Namespace":
		return kc.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	default:
		return nil, fmt.Errorf("getObject: unknown kind %s", kind)
	}
}
