//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/gitserver"
)

// fluxProgram is a control plane and a worker with Flux syncing clusters/flux of the repository
// fleet on the test's git server.
func fluxProgram(l *lab.Lab, git *gitserver.Server) string {
	indent := func(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n          ") }

	return fmt.Sprintf(`name: flux
runtime: yaml
config:
  factoryUrl:
    type: string
resources:
  flux:
    type: talos-proxmox:index:TalosProxmoxCluster
    properties:
      clusterName: flux
      talosVersion: v1.11.5
      network:
        gateway: %[1]s
      image:
        factoryUrl: ${factoryUrl}
      flux:
        gitRepository:
          url: %[4]s
        knownHosts: |
          %[5]s
      nodes:
        cp-1: {hostNode: pve1, role: controlplane, ip: %[2]s}
        worker-1: {hostNode: pve2, role: worker, ip: %[3]s}
outputs:
  kubeconfig: ${flux.kubeconfig}
  fluxDeployKey: ${flux.fluxDeployKey}
`, l.Address(1), l.Address(11), l.Address(21), git.SSHURL("fleet"), indent(git.KnownHosts()))
}

// TestFluxBootstrap: flux installs Flux's four controllers (their Deployments and CRDs) in
// flux-system after the health gate, the GitRepository and Kustomization flux-system that sync
// clusters/flux of the repository, and the Secret flux-system with a deploy key the component
// generated: its public half is the fluxDeployKey output, and once the test's git server
// authorizes it, the Secret's own identity and known_hosts clone the repository (before, they
// cannot). A new keyRotation makes a new key, in the Secret and the output. The lab runs no
// containers, so Flux's controllers do not reconcile: only what is in the API server is checked.
func TestFluxBootstrap(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	git := gitserver.Start(t)
	git.Seed("fleet", "main", map[string]string{"clusters/flux/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"})

	e := newEnv(t)
	_, p := onLab(t, e, lab.Options{Subnet: 72}, func(l *lab.Lab) string { return fluxProgram(l, git) })

	mustRun(t, p, "up", "--yes", "--skip-preview")

	dyn := dynamicClient(t, p)
	ctx := t.Context()
	get := func(gvr schema.GroupVersionResource, ns, name string) map[string]any {
		t.Helper()

		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s/%s: %v", gvr.Resource, ns, name, err)
			return nil
		}

		return u.Object
	}

	for _, d := range []string{"source-controller", "kustomize-controller", "helm-controller", "notification-controller"} {
		get(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "flux-system", d)
	}

	for _, crd := range []string{"gitrepositories.source.toolkit.fluxcd.io", "kustomizations.kustomize.toolkit.fluxcd.io",
		"helmreleases.helm.toolkit.fluxcd.io", "alerts.notification.toolkit.fluxcd.io"} {
		get(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, "", crd)
	}

	repo := get(schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}, "flux-system", "flux-system")
	if spec, _ := repo["spec"].(map[string]any); spec["url"] != git.SSHURL("fleet") {
		t.Errorf("the GitRepository's spec: %v", spec)
	}

	ks := get(schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}, "flux-system", "flux-system")
	if spec, _ := ks["spec"].(map[string]any); spec["path"] != "./clusters/flux" {
		t.Errorf("the Kustomization's spec: %v", spec)
	}

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	identity := func() (private, public string) {
		t.Helper()

		s, err := kc.CoreV1().Secrets("flux-system").Get(ctx, "flux-system", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Secret flux-system: %v", err)
		}

		if err := git.CanClone("fleet", "main", string(s.Data["identity"])); err == nil {
			t.Errorf("the deploy key clones before the git server authorized it")
		}

		pub := strings.TrimSpace(mustRun(t, p, "stack", "output", "fluxDeployKey"))
		if got := strings.TrimSpace(string(s.Data["identity.pub"])); !strings.HasPrefix(pub, "ssh-ed25519 ") || got != pub {
			t.Errorf("fluxDeployKey %q, the Secret's identity.pub %q", pub, got)
		}

		git.Authorize(pub)

		files, err := git.CloneWith("fleet", "main", string(s.Data["identity"]), string(s.Data["known_hosts"]))
		if err != nil || files["clusters/flux/app.yaml"] == "" {
			t.Errorf("cloning with the Secret's identity and known_hosts: %v (files %v)", err, files)
		}

		return string(s.Data["identity"]), pub
	}

	_, first := identity()

	editProgram(t, e, "      flux:\n", "      flux:\n        keyRotation: \"2\"\n")
	mustRun(t, p, "up", "--yes", "--skip-preview")

	if _, second := identity(); second == first {
		t.Errorf("a new keyRotation kept the deploy key %s", first)
	}

	mustRun(t, p, "preview", "--expect-no-changes")
}
