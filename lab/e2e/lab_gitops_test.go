//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/upstream"
)

// TestGitOpsArgoCD runs examples/gitops on the lab: Argo CD's upstream install manifest (v3.6.1,
// from its Go module, served on loopback under GitHub's raw path) through extraManifests with
// the namespace argocd, and an Argo CD Application through inlineManifests. The lab's API server
// then holds Argo CD's CRDs, its Deployments and StatefulSet in argocd (none in default, where
// Talos alone would have put them), the RBAC subjects' ServiceAccounts next to them, and the
// Application. Talos' configuration does not carry the URL; a second up changes nothing.
func TestGitOpsArgoCD(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	ctx := t.Context()

	install, err := upstream.ArgoCDInstall(ctx)
	if err != nil {
		t.Fatal(err)
	}

	srv, err := upstream.Serve(ctx, map[string][]byte{upstream.ArgoCDInstallPath: install})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close() //nolint:errcheck

	e := newEnv(t)
	copyDir(t, repoPath(t, "examples/gitops"), e.dir)

	program, err := os.ReadFile(filepath.Join(e.dir, "Pulumi.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	const github = "https://raw.githubusercontent.com"
	if !strings.Contains(string(program), github+upstream.ArgoCDInstallPath) {
		t.Fatalf("examples/gitops does not install Argo CD %s from GitHub", upstream.ArgoCDVersion)
	}

	// Only the host of the URL changes.
	program = []byte(strings.ReplaceAll(string(program), github, srv.URL))
	if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), program, 0o644); err != nil {
		t.Fatal(err)
	}

	_, p := onLab(t, e, lab.Options{Subnet: 62}, nil)

	start := time.Now()
	out := mustRun(t, p, "up", "--yes", "--skip-preview")
	t.Logf("up with Argo CD took %s", time.Since(start).Round(time.Second))

	if !strings.Contains(out, "manifests in sync") {
		t.Errorf("the up did not report the manifest sync:\n%s", out)
	}

	dyn := dynamicClient(t, p)

	get := func(gvr schema.GroupVersionResource, ns, name string) error {
		_, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}

	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, name := range []string{"applications.argoproj.io", "applicationsets.argoproj.io", "appprojects.argoproj.io"} {
		if err := get(crds, "", name); err != nil {
			t.Errorf("CRD %s: %v", name, err)
		}
	}

	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	for _, name := range []string{"argocd-server", "argocd-repo-server", "argocd-redis", "argocd-dex-server",
		"argocd-applicationset-controller", "argocd-notifications-controller"} {
		if err := get(deployments, "argocd", name); err != nil {
			t.Errorf("Deployment argocd/%s: %v", name, err)
		}

		if err := get(deployments, "default", name); err == nil {
			t.Errorf("Deployment default/%s exists: the manifest went to Talos' default namespace", name)
		}
	}

	if err := get(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, "argocd", "argocd-application-controller"); err != nil {
		t.Errorf("StatefulSet argocd/argocd-application-controller: %v", err)
	}

	// The ClusterRoleBindings bind argocd/<service account>: those must exist.
	sas := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	for _, name := range []string{"argocd-application-controller", "argocd-server"} {
		if err := get(sas, "argocd", name); err != nil {
			t.Errorf("ServiceAccount argocd/%s, bound by Argo CD's ClusterRoleBinding: %v", name, err)
		}
	}

	apps := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
	if err := get(apps, "argocd", "guestbook"); err != nil {
		t.Errorf("Application argocd/guestbook: %v", err)
	}

	if err := waitDeploymentsAvailable(ctx, dyn, "argocd", 6); err != nil {
		t.Error(err)
	}

	if out, err := p.Run(ctx, "preview", "--expect-no-changes", "--diff"); err != nil {
		t.Errorf("preview after up shows changes: %v\n%s", err, out)
	}
}

// waitDeploymentsAvailable waits until want Deployments of ns report an available replica (the
// lab's controller manager, scheduler and kubelets run them).
func waitDeploymentsAvailable(ctx context.Context, dyn dynamic.Interface, ns string, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

	for {
		list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		available := 0

		if err == nil {
			for _, d := range list.Items {
				if n, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas"); n > 0 {
					available++
				}
			}

			if available >= want {
				return nil
			}
		}

		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d Deployments in %s became available: %w", available, want, ns, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}
