package day2

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestScopeNamespace: a namespaced object without a namespace goes to "default"; a cluster-scoped
// one loses the namespace a chart wrote on it (the API server stores it without); a kind the
// mapper does not know keeps what it has.
func TestScopeNamespace(t *testing.T) {
	t.Parallel()

	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)

	for _, tc := range []struct{ apiVersion, kind, namespace, want string }{
		{"v1", "ConfigMap", "", "default"},
		{"v1", "ConfigMap", "kube-system", "kube-system"},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "csi-proxmox", ""},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "", ""},
		{"example.com/v1", "Widget", "", ""},
		{"example.com/v1", "Widget", "team", "team"},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(tc.apiVersion)
		u.SetKind(tc.kind)
		u.SetName("x")
		u.SetNamespace(tc.namespace)

		scopeNamespace(mapper, u)

		if got := u.GetNamespace(); got != tc.want {
			t.Errorf("%s in %q: namespace %q, want %q", tc.kind, tc.namespace, got, tc.want)
		}
	}
}
