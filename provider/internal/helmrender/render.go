package helmrender

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
)

// RenderArchive renders a release from a fetched chart once, like
// `helm template <name> <chart> -n <namespace> --kube-version <v> --include-crds --skip-tests`:
// client-only, nothing remote (`lookup` returns nothing), test hooks dropped, other hooks kept as
// ordinary manifests after the others, NOTES dropped. The result is normalised (see Manifest).
func RenderArchive(ctx context.Context, a *Archive, rel Release, kubeVersion string) (*Manifest, error) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("%s: Kubernetes version %q: %w", rel.Path, kubeVersion, err)
	}

	ch, second, err := a.loadTwice()
	if err != nil {
		return nil, fmt.Errorf("%s: chart %s is not a valid Helm chart: %w", rel.Path, rel.Source, err)
	}

	// A digest pin is looked up in the cache by content alone: make sure the archive is the chart
	// asked for.
	if !rel.Source.IsLocal() && ch.Metadata.Name != rel.Source.Chart {
		return nil, fmt.Errorf("%s: chart %s: the archive holds chart %q; check chart and digest", rel.Path,
			rel.Source, ch.Metadata.Name)
	}

	if v := rel.Source.Version; v != "" && strings.TrimPrefix(v, "v") != strings.TrimPrefix(ch.Metadata.Version, "v") {
		return nil, fmt.Errorf("%s: chart %s is version %s, not %s; check version", rel.Path, rel.Source,
			ch.Metadata.Version, v)
	}

	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun = true
	inst.DryRunOption = "client"
	inst.ClientOnly = true
	inst.Replace = true
	inst.IncludeCRDs = rel.IncludeCRDs
	inst.ReleaseName = rel.Name
	inst.Namespace = rel.Namespace
	inst.KubeVersion = kv

	// Helm validates the values against the chart's values.schema.json before rendering, and
	// compiling a large schema (Cilium's) costs as much as rendering. Validate beside the render
	// instead, on a copy of the chart; a validation error wins, exactly as if Helm had run it.
	inst.SkipSchemaValidation = true

	validated := make(chan error, 1)
	go func() { validated <- validateValues(second, rel.Values) }()

	out, err := inst.RunWithContext(ctx, ch, copyValues(rel.Values))
	if verr := <-validated; verr != nil {
		err = verr
	}

	if err != nil {
		return nil, fmt.Errorf("%s: rendering chart %s %s failed: %w; check values", rel.Path,
			ch.Metadata.Name, ch.Metadata.Version, err)
	}

	docs := []string{out.Manifest}

	for _, h := range out.Hooks {
		if !isTestHook(h) {
			docs = append(docs, h.Manifest)
		}
	}

	m, err := Normalise(strings.Join(docs, "\n---\n"), rel.Namespace)
	if err != nil {
		return nil, fmt.Errorf("%s: chart %s %s rendered invalid YAML: %w", rel.Path, ch.Metadata.Name,
			ch.Metadata.Version, err)
	}

	m.Release = rel.Name
	m.Namespace = rel.Namespace
	m.Chart = ch.Metadata.Name
	m.ChartVersion = ch.Metadata.Version
	m.Digest = a.Digest

	return m, nil
}

// validateValues is Helm's schema check (chartutil.ToRenderValuesWithSchemaValidation): the
// values coalesced with the chart's defaults, against the schemas of the chart and its subcharts.
func validateValues(load func() (*chart.Chart, error), values map[string]any) error {
	ch, err := load()
	if err != nil {
		return err
	}

	vals, err := chartutil.CoalesceValues(ch, copyValues(values))
	if err != nil {
		return err
	}

	if err := chartutil.ValidateAgainstSchema(ch, vals); err != nil {
		return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s", err)
	}

	return nil
}

func isTestHook(h *release.Hook) bool {
	return slices.Contains(h.Events, release.HookTest)
}

// copyValues deep-copies values: Helm must not see (or change) the caller's maps.
func copyValues(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		out[k] = copyValue(x)
	}

	return out
}

func copyValue(x any) any {
	switch t := x.(type) {
	case map[string]any:
		return copyValues(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = copyValue(e)
		}

		return out
	default:
		return x
	}
}

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

func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}

	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}

	return nil
}

func scalar(m *yaml.Node, key string) string {
	if n := child(m, key); n != nil && n.Kind == yaml.ScalarNode {
		return n.Value
	}

	return ""
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}

	return strings.Join(lines, "\n")
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

// sameRender is the determinism gate: two renders of the same inputs must be byte-identical.
func sameRender(rel Release, a, b *Manifest) error {
	if a.Contents == b.Contents {
		return nil
	}

	da, db := objectTexts(a), objectTexts(b)

	var differ []string

	for _, k := range slices.Sorted(maps.Keys(da)) {
		if db[k] != da[k] {
			differ = append(differ, k)
		}
	}

	for _, k := range slices.Sorted(maps.Keys(db)) {
		if _, ok := da[k]; !ok {
			differ = append(differ, k)
		}
	}

	hint := rel.Hint
	if hint == "" {
		hint = "set values so the chart does not generate them (provide the certificates or passwords yourself, " +
			"or turn the feature off)"
	}

	return fmt.Errorf("%s: chart %s %s renders differently every time (%s differ): it generates random "+
		"values such as certificates or passwords, which would change the machine configuration on every "+
		"`pulumi up`; %s", rel.Path, a.Chart, a.ChartVersion, list(differ, 10), hint)
}

func objectTexts(m *Manifest) map[string]string {
	out := map[string]string{}

	docs := splitDocuments(m.Contents)
	for i, o := range m.Objects {
		if i < len(docs) {
			out[o.String()] += docs[i]
		}
	}

	return out
}
