package day2

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// clusterScoped are the cluster-scoped kinds a Kubernetes API server serves itself (and
// kube-aggregator's APIService), as kubectl's discovery would report them.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Kind: "ComponentStatus"}:  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
	{Group: "internal.apiserver.k8s.io", Kind: "StorageVersion"}:                      true,
	{Group: "storagemigration.k8s.io", Kind: "StorageVersionMigration"}:               true,
	{Group: "authentication.k8s.io", Kind: "SelfSubjectReview"}:                       true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}:                  true,
	{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}:                      true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectRulesReview"}:                   true,
	{Group: "authentication.k8s.io", Kind: "TokenReview"}:                             true,
}

// namespaced puts the objects of the manifests with a Namespace (`kubectl apply -n`) that name
// no namespace into it, except cluster-scoped kinds: the API server's own and the kinds of the
// CustomResourceDefinitions of scope Cluster among all manifests. A kind that neither the API
// server nor these manifests define is taken as namespaced, as most custom resources are. The
// Namespace object itself is added (to the first manifest that uses it) when no manifest
// declares it.
func namespaced(manifests []Manifest, decoded [][]*unstructured.Unstructured) {
	cluster := map[schema.GroupKind]bool{}
	declared := map[string]bool{}

	for _, objs := range decoded {
		for _, o := range objs {
			switch o.GroupVersionKind().GroupKind() {
			case schema.GroupKind{Kind: "Namespace"}:
				declared[o.GetName()] = true
			case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
				group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
				kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
				scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")

				if scope == "Cluster" {
					cluster[schema.GroupKind{Group: group, Kind: kind}] = true
				}
			}
		}
	}

	for i, m := range manifests {
		if m.Namespace == "" {
			continue
		}

		for _, o := range decoded[i] {
			gk := o.GroupVersionKind().GroupKind()
			if o.GetNamespace() == "" && !clusterScoped[gk] && !cluster[gk] {
				o.SetNamespace(m.Namespace)
			}
		}

		if !declared[m.Namespace] {
			ns := &unstructured.Unstructured{}
			ns.SetAPIVersion("v1")
			ns.SetKind("Namespace")
			ns.SetName(m.Namespace)
			decoded[i] = append([]*unstructured.Unstructured{ns}, decoded[i]...)
			declared[m.Namespace] = true
		}
	}
}
