package helmrender

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/yamlnode"
)

// document is one object of the stream.
type document struct {
	obj  Object
	text string
	node *yaml.Node // set when the text has to be re-encoded
}

// Normalise splits a rendered stream into objects, drops empty and comment-only documents and
// Helm's `# Source:` lines, gives namespaced objects without a namespace the release namespace
// (Talos would put them in `default`), and creates the release namespace first when it is
// neither kube-system nor default and the chart does not. Helm's install order is kept.
func Normalise(stream, namespace string) (*Manifest, error) {
	var docs []document

	clusterScoped := map[string]bool{}

	for _, raw := range splitDocuments(stream) {
		text := stripSourceLines(raw)
		if text == "" {
			continue
		}

		var root yaml.Node
		if err := yaml.Unmarshal([]byte(text), &root); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, firstLines(text, 5))
		}

		if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
			if root.Kind == 0 || (root.Kind == yaml.DocumentNode && len(root.Content) == 0) {
				continue // only comments
			}

			return nil, fmt.Errorf("a document is not a Kubernetes object:\n%s", firstLines(text, 5))
		}

		top := root.Content[0]
		d := document{text: text, obj: Object{
			APIVersion: scalar(top, "apiVersion"),
			Kind:       scalar(top, "kind"),
		}}

		if meta := child(top, "metadata"); meta != nil {
			d.obj.Name = scalar(meta, "name")
			d.obj.Namespace = objectNamespace(top)
		}

		if d.obj.Kind == "" || d.obj.APIVersion == "" {
			return nil, fmt.Errorf("a document has no kind or apiVersion:\n%s", firstLines(text, 5))
		}

		if d.obj.Kind == "CustomResourceDefinition" {
			if spec := child(top, "spec"); spec != nil && scalar(spec, "scope") == "Cluster" {
				if names := child(spec, "names"); names != nil {
					clusterScoped[scalar(names, "kind")] = true
				}
			}
		}

		d.node = &root
		docs = append(docs, d)
	}

	needNamespace := namespace != "kube-system" && namespace != "default" && namespace != ""

	var b strings.Builder

	m := &Manifest{}

	write := func(o Object, text string) {
		if b.Len() > 0 {
			b.WriteString("---\n")
		}

		b.WriteString(strings.TrimRight(text, "\n"))
		b.WriteString("\n")

		m.Objects = append(m.Objects, o)
	}

	if needNamespace && !slices.ContainsFunc(docs, func(d document) bool {
		return d.obj.Kind == "Namespace" && d.obj.Name == namespace
	}) {
		write(Object{APIVersion: "v1", Kind: "Namespace", Name: namespace},
			"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+namespace)
	}

	for _, d := range docs {
		top := d.node.Content[0]
		changed := false

		if items := child(top, "items"); strings.HasSuffix(d.obj.Kind, "List") && items != nil && items.Kind == yaml.SequenceNode {
			// Talos applies a list's items one by one: each needs its namespace.
			for _, it := range items.Content {
				if it.Kind == yaml.MappingNode && objectNamespace(it) == "" && !isClusterScoped(scalar(it, "kind"), clusterScoped) {
					if err := setNamespace(it, namespace); err != nil {
						return nil, err
					}

					changed = true
				}
			}
		} else if d.obj.Namespace == "" && !isClusterScoped(d.obj.Kind, clusterScoped) {
			if err := setNamespace(top, namespace); err != nil {
				return nil, err
			}

			d.obj.Namespace = namespace
			changed = true
		}

		if changed {
			text, err := encode(d.node)
			if err != nil {
				return nil, err
			}

			d.text = text
		}

		write(d.obj, d.text)
	}

	m.Contents = b.String()

	return m, nil
}

// splitDocuments splits a YAML stream at `---` lines.
func splitDocuments(stream string) []string {
	var (
		out []string
		cur strings.Builder
	)

	for line := range strings.Lines(stream) {
		if t := strings.TrimRight(line, " \t\r\n"); t == "---" || strings.HasPrefix(t, "--- ") {
			out = append(out, cur.String())
			cur.Reset()

			continue
		}

		cur.WriteString(line)
	}

	return append(out, cur.String())
}

// stripSourceLines drops Helm's leading `# Source: <template>` comment and surrounding blank
// lines.
func stripSourceLines(doc string) string {
	doc = strings.TrimSpace(doc)
	for strings.HasPrefix(doc, "# Source: ") {
		_, rest, _ := strings.Cut(doc, "\n")
		doc = strings.TrimSpace(rest)
	}

	return doc
}

// objectNamespace is an object's metadata.namespace; empty when missing, empty or null.
func objectNamespace(obj *yaml.Node) string {
	if ns := child(child(obj, "metadata"), "namespace"); ns != nil && ns.Kind == yaml.ScalarNode && ns.Tag != "!!null" {
		return ns.Value
	}

	return ""
}

// setNamespace sets an object's metadata.namespace, in place when the template left it empty or
// null.
func setNamespace(obj *yaml.Node, namespace string) error {
	meta := child(obj, "metadata")
	if meta == nil {
		meta = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		obj.Content = append(obj.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "metadata"}, meta)
	}

	if meta.Kind != yaml.MappingNode {
		return fmt.Errorf("metadata of a %s is not a mapping", scalar(obj, "kind"))
	}

	ns := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: namespace}
	if old := child(meta, "namespace"); old != nil {
		*old = *ns
	} else {
		meta.Content = append(meta.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "namespace"}, ns)
	}

	return nil
}

func encode(root *yaml.Node) (string, error) {
	var b strings.Builder

	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)

	if err := enc.Encode(root); err != nil {
		return "", err
	}

	if err := enc.Close(); err != nil {
		return "", err
	}

	return b.String(), nil
}

// child is mapping m's value for key, or nil.
var child = yamlnode.Child

func scalar(m *yaml.Node, key string) string {
	if n := child(m, key); n != nil && n.Kind == yaml.ScalarNode {
		return n.Value
	}

	return ""
}

// isClusterScoped reports whether objects of a kind live outside namespaces: the built-in
// cluster-scoped kinds, the cluster-scoped Cilium kinds, and kinds whose CRD in the same render
// says so. A kind not known here gets the release namespace: the API server drops the namespace
// of a cluster-scoped object, while a namespaced object without one would land in `default`.
func isClusterScoped(kind string, fromCRDs map[string]bool) bool {
	return clusterScopedKinds[kind] || fromCRDs[kind]
}

var clusterScopedKinds = map[string]bool{
	"APIService": true, "CertificateSigningRequest": true, "ClusterRole": true,
	"ClusterRoleBinding": true, "ComponentStatus": true, "CSIDriver": true, "CSINode": true,
	"CustomResourceDefinition": true, "FlowSchema": true, "IngressClass": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"MutatingWebhookConfiguration": true, "Namespace": true, "Node": true,
	"PersistentVolume": true, "PodSecurityPolicy": true, "PriorityClass": true,
	"PriorityLevelConfiguration": true, "RuntimeClass": true, "StorageClass": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"ValidatingWebhookConfiguration": true, "VolumeAttachment": true, "VolumeAttributesClass": true,
	"DeviceClass": true, "IPAddress": true, "ServiceCIDR": true, "StorageVersionMigration": true,
	"GatewayClass": true,
	// Cilium's cluster-scoped custom resources (their CRDs are registered by the operator).
	"CiliumClusterwideNetworkPolicy": true, "CiliumClusterwideEnvoyConfig": true,
	"CiliumExternalWorkload": true, "CiliumIdentity": true, "CiliumNode": true,
	"CiliumLoadBalancerIPPool": true, "CiliumL2AnnouncementPolicy": true, "CiliumPodIPPool": true,
	"CiliumBGPClusterConfig": true, "CiliumBGPPeerConfig": true, "CiliumBGPAdvertisement": true,
	"CiliumBGPNodeConfig": true, "CiliumBGPNodeConfigOverride": true, "CiliumBGPPeeringPolicy": true,
	"CiliumCIDRGroup": true, "CiliumEgressGatewayPolicy": true, "CiliumEndpointSlice": true,
}
