package helmrender_test

import (
	"context"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/golden"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender/helmtest"
)

// TestNamespace renders Cilium into its own namespace: the namespace is created first and every
// namespaced object is in it.
func TestNamespace(t *testing.T) {
	t.Parallel()

	rel := cilium("")
	rel.Source = helmrender.Source{Chart: helmtest.CiliumArchive(t)}
	rel.Namespace = "networking"

	m, err := renderer(t).Render(context.Background(), rel)
	if err != nil {
		t.Fatal(err)
	}

	if first := m.Objects[0]; first.Kind != "Namespace" || first.Name != "networking" {
		t.Errorf("first object = %s, want Namespace networking", first)
	}

	for _, o := range m.Objects[1:] {
		switch o.Kind {
		case "Namespace", "ClusterRole", "ClusterRoleBinding":
		default:
			if o.Namespace != "networking" && o.Namespace != "cilium-secrets" {
				t.Errorf("%s is not in the release namespace", o)
			}
		}
	}
}

func TestNormaliseAddsMissingNamespaces(t *testing.T) {
	t.Parallel()

	stream := `---
# Source: x/templates/sa.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: app
  labels: {a: b}
---
# Source: x/templates/empty.yaml
# only a comment
---
# Source: x/templates/crd.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  scope: Cluster
  names: {kind: Widget}
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: r
---
apiVersion: example.com/v1
kind: Gadget
metadata:
  name: g
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: empty-namespace
  namespace: ""
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: null-namespace
  namespace: null
---
apiVersion: v1
kind: ConfigMapList
items:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: listed}
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    metadata: {name: listed-role}
`

	m, err := helmrender.Normalise(stream, "apps")
	if err != nil {
		t.Fatal(err)
	}

	golden.Check(t, "normalised.yaml", m.Contents)

	var got []string
	for _, o := range m.Objects {
		got = append(got, o.String())
	}

	want := "Namespace apps,ServiceAccount apps/app,CustomResourceDefinition widgets.example.com,Widget w,ClusterRole r,Gadget apps/g," +
		"ConfigMap apps/empty-namespace,ConfigMap apps/null-namespace,ConfigMapList "
	if strings.Join(got, ",") != want {
		t.Errorf("objects = %s\nwant      %s", strings.Join(got, ","), want)
	}

	if _, err := helmrender.Normalise("apiVersion: v1\nkind: [\n", "x"); err == nil {
		t.Error("invalid YAML accepted")
	}

	if _, err := helmrender.Normalise("- a\n- b\n", "x"); err == nil {
		t.Error("a list document accepted as an object")
	}
}
