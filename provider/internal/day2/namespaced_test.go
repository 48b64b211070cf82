package day2

import (
	"slices"
	"testing"
)

// A manifest written for `kubectl apply -n argocd` (Argo CD's install.yaml in small): its
// namespaced objects go to argocd, cluster-scoped ones (built-in, or of a CRD of scope Cluster)
// stay cluster-scoped, an object with its own namespace keeps it, and the Namespace is added
// because no manifest declares it. A manifest without a namespace is left as written.
func TestParseManifestsWithNamespace(t *testing.T) {
	install := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: applications.argoproj.io}
spec: {group: argoproj.io, scope: Namespaced, names: {kind: Application, plural: applications}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterthings.example.com}
spec: {group: example.com, scope: Cluster, names: {kind: ClusterThing, plural: clusterthings}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: argocd-server}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: argocd-server}
subjects: [{kind: ServiceAccount, name: argocd-server, namespace: argocd}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: argocd-server}
---
apiVersion: example.com/v1
kind: ClusterThing
metadata: {name: one}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: elsewhere, namespace: kube-system}
`
	plain := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n"

	objs, keys := parseKeys(t,
		Manifest{Name: "https://example.com/install.yaml", Contents: install, Namespace: "argocd"},
		Manifest{Name: "https://example.com/plain.yaml", Contents: plain},
	)

	want := []string{
		"/Namespace//argocd",
		"apiextensions.k8s.io/CustomResourceDefinition//applications.argoproj.io",
		"apiextensions.k8s.io/CustomResourceDefinition//clusterthings.example.com",
		"/ServiceAccount/argocd/argocd-server",
		"rbac.authorization.k8s.io/ClusterRoleBinding//argocd-server",
		"apps/Deployment/argocd/argocd-server",
		"example.com/ClusterThing//one",
		"/ConfigMap/kube-system/elsewhere",
		"/ConfigMap//plain",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("keys:\n got %q\nwant %q", keys, want)
	}

	if objs[0].Manifest != "https://example.com/install.yaml" {
		t.Errorf("the added Namespace belongs to %q", objs[0].Manifest)
	}

	// Declared by another manifest: not added twice.
	objs, err := ParseManifests([]Manifest{
		{Name: "ns", Contents: "apiVersion: v1\nkind: Namespace\nmetadata: {name: argocd}\n"},
		{Name: "install", Contents: "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n", Namespace: "argocd"},
	})
	if err != nil || len(objs) != 2 || objs[1].Key != "/ServiceAccount/argocd/a" {
		t.Errorf("with the Namespace declared: %v %v", objs, err)
	}
}
