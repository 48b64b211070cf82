//go:build e2e

package e2e

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// syncForceAndPrune continues TestManifestSync on syncCluster's batch manifest, on the lab's real
// kube-apiserver:
//   - the immutable ConfigMap frozen gets new data: without manifestSync.force the dry run refuses
//     it, the up fails saying to set force, and nothing changed;
//   - with manifestSync.force and pruneCrdsAndNamespaces, and the Namespace team-b and the CRD
//     widgets.lab.example.com dropped from the manifest: frozen is recreated with the new data,
//     the Namespace and the CRD are deleted and leave Talos' inventory, and the preview after
//     shows no changes;
//   - without force again, a Job changed into one the API server refuses (a negative
//     backoffLimit): a Job is recreated whenever its change is refused, and the API server answers
//     the invalid value like an immutable field, so the ssa dry run passes it; the sync's own dry
//     run of the new version's creation refuses it: the up fails with nothing changed and the Job
//     is still there, the same object.
func syncForceAndPrune(t *testing.T, e *env, p *lab.Pulumi, kc kubernetes.Interface) {
	t.Helper()

	ctx := t.Context()

	frozen := objectUID(t, kc, "ConfigMap", "default", "frozen")

	editProgram(t, e, "            data:\n              rev: \"1\"", "            data:\n              rev: \"2\"")

	out, err := p.Run(ctx, "up", "--yes", "--skip-preview")
	if err == nil || !strings.Contains(out, "the dry run refused the manifests, nothing was changed") ||
		!strings.Contains(out, "set manifestSync.force to delete and recreate such objects") {
		t.Errorf("a changed immutable ConfigMap did not fail the sync at its dry run with the hint to set force: %v\n%s", err, out)
	}

	if c, err := kc.CoreV1().ConfigMaps("default").Get(ctx, "frozen", metav1.GetOptions{}); err != nil || c.UID != frozen || c.Data["rev"] != "1" {
		t.Errorf("the refused sync changed the immutable ConfigMap: %v", err)
	}

	editProgram(t, e, "      inlineManifests:\n", "      manifestSync: {force: true, pruneCrdsAndNamespaces: true}\n      inlineManifests:\n")
	editProgram(t, e, "            ---\n            apiVersion: v1\n            kind: Namespace\n            metadata:\n              name: team-b\n", "")

	program := readProgram(t, e)
	crd := program[strings.Index(program, "            ---\n            apiVersion: apiextensions.k8s.io/v1"):strings.Index(program, "      nodes:\n")]
	editProgram(t, e, crd, "")

	out = mustRun(t, p, "preview", "--diff")
	if want := "manifest sync planned: batch: 1 changed (ConfigMap default/frozen); " +
		"2 pruned (Namespace team-b, CustomResourceDefinition.apiextensions.k8s.io widgets.lab.example.com)"; !strings.Contains(out, want) {
		t.Errorf("the preview does not say %q:\n%s", want, out)
	}

	out = mustRun(t, p, "up", "--yes", "--skip-preview")
	if !strings.Contains(out, " 2 pruned") || strings.Contains(out, "left in place") {
		t.Errorf("the up did not prune the Namespace and the CRD:\n%s", out)
	}

	if c, err := kc.CoreV1().ConfigMaps("default").Get(ctx, "frozen", metav1.GetOptions{}); err != nil || c.UID == frozen || c.Data["rev"] != "2" {
		t.Errorf("manifestSync.force did not recreate the immutable ConfigMap with its new data: %v", err)
	}

	// The namespace controller may still be finalizing the Namespace.
	if ns, err := kc.CoreV1().Namespaces().Get(ctx, "team-b", metav1.GetOptions{}); err == nil && ns.DeletionTimestamp == nil {
		t.Errorf("the dropped Namespace was not deleted with manifestSync.pruneCrdsAndNamespaces")
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}

	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dynamicClient(t, p).Resource(crds).Get(ctx, "widgets.lab.example.com", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dropped CRD was not deleted with manifestSync.pruneCrdsAndNamespaces: %v", err)
	}

	inv, err := kc.CoreV1().ConfigMaps("kube-system").Get(ctx, "talos-bootstrap-manifests-inventory", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for _, key := range []string{"_team-b__Namespace", "_widgets.lab.example.com_apiextensions.k8s.io_CustomResourceDefinition"} {
		if _, ok := inv.Data[key]; ok {
			t.Errorf("the pruned %s is still in Talos' inventory", key)
		}
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	editProgram(t, e, "      manifestSync: {force: true, pruneCrdsAndNamespaces: true}\n", "")
	editProgram(t, e, "              backoffLimit: 0\n", "              backoffLimit: -1\n")

	job := objectUID(t, kc, "Job", "default", "migrate")

	out, err = p.Run(ctx, "up", "--yes", "--skip-preview")
	if err == nil || !strings.Contains(out, "the dry run refused the manifests, nothing was changed") ||
		!strings.Contains(out, "Job default/migrate: its change needs it deleted and created again") || !strings.Contains(out, "backoffLimit") {
		t.Errorf("a Job the API server refuses did not fail the sync at its dry run: %v\n%s", err, out)
	}

	if uid := objectUID(t, kc, "Job", "default", "migrate"); uid != job {
		t.Errorf("the Job whose new version the API server refuses was recreated or deleted (uid %s, was %s)", uid, job)
	}
}

// objectUID is an object's uid, which changes when it is recreated.
func objectUID(t *testing.T, kc kubernetes.Interface, kind, ns, name string) types.UID {
	t.Helper()

	o, err := getObject(t.Context(), kc, kind, ns, name)
	if err != nil {
		t.Fatalf("%s %s/%s: %v", kind, ns, name, err)
	}

	return o.GetUID()
}

func dynamicClient(t *testing.T, p *lab.Pulumi) dynamic.Interface {
	t.Helper()

	rc, err := clientcmd.RESTConfigFromKubeConfig([]byte(strings.TrimSpace(mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))))
	if err != nil {
		t.Fatal(err)
	}

	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}

	return dc
}
