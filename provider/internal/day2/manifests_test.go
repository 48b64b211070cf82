package day2

import (
	"slices"
	"strings"
	"testing"
)

const ciliumV1 = `apiVersion: v1
kind: ConfigMap
metadata: {name: cilium-config, namespace: kube-system}
data: {hubble: "true"}
---
# a comment-only document between objects
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: cilium, namespace: kube-system}
spec: {selector: {matchLabels: {k8s-app: cilium}}}
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: ServiceAccount
    metadata: {name: cilium, namespace: kube-system}
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    metadata: {name: cilium}
`

func TestParseManifests(t *testing.T) {
	t.Parallel()

	objs, keys := parseKeys(t, Manifest{Name: "cilium", Contents: ciliumV1})

	want := []string{
		"/ConfigMap/kube-system/cilium-config", "apps/DaemonSet/kube-system/cilium",
		"/ServiceAccount/kube-system/cilium", "rbac.authorization.k8s.io/ClusterRole//cilium",
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}

	if got := Display(keys[3]); got != "ClusterRole.rbac.authorization.k8s.io cilium" {
		t.Errorf("Display = %q", got)
	}

	// The hash follows the object, not its formatting.
	again, err := ParseManifests([]Manifest{{Name: "cilium", Contents: strings.ReplaceAll(ciliumV1, "{hubble: \"true\"}", "\n  hubble: \"true\"")}})
	if err != nil {
		t.Fatal(err)
	}

	if again[0].Hash != objs[0].Hash {
		t.Error("reformatting an object changed its hash")
	}
}

func TestParseManifestsRejects(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct{ name, contents, want string }{
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", "manifest bad: an object has no apiVersion or kind"},
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: x-}\n", "a ConfigMap has no metadata.name"},
		{"not YAML", "apiVersion: v1\nkind: [\n", "manifest bad:"},
		// A manifest may be a Secret: its fields are named, never its values.
		{"no kind, secret data", "apiVersion: v1\nstringData: {password: hunter2}\nmetadata: {name: x}\n", "(its fields: apiVersion, metadata, stringData)"},
	} {
		_, err := ParseManifests([]Manifest{{Name: "bad", Contents: tc.contents}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}

		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error quotes the manifest's values: %v", tc.name, err)
		}
	}

	_, err := ParseManifests([]Manifest{{Name: "a", Contents: ciliumV1}, {Name: "b", Contents: ciliumV1}})
	if err == nil || !strings.Contains(err.Error(), "manifest b: ConfigMap kube-system/cilium-config is also in manifest a") {
		t.Errorf("duplicate objects: %v", err)
	}
}

func TestPlanSync(t *testing.T) {
	t.Parallel()

	v1, err := ParseManifests([]Manifest{{Name: "cilium", Contents: ciliumV1}, {Name: "app", Contents: "apiVersion: v1\nkind: Service\nmetadata: {name: app}\n"}})
	if err != nil {
		t.Fatal(err)
	}

	if p := PlanSync(AppliedOf(v1), v1); !p.Empty() {
		t.Fatalf("an unchanged configuration plans %+v", p)
	}

	// Cilium's ConfigMap changes, its ClusterRole is dropped, the app manifest goes and a new one
	// takes over its Service.
	v2text := strings.Replace(ciliumV1, `hubble: "true"`, `hubble: "false"`, 1)
	v2text = v2text[:strings.Index(v2text, "  - apiVersion: rbac")]

	v2, err := ParseManifests([]Manifest{
		{Name: "cilium", Contents: v2text},
		{Name: "web", Contents: "apiVersion: v1\nkind: Service\nmetadata: {name: app}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: web, namespace: apps}\n"},
	})
	if err != nil {
		t.Fatal(err)
	}

	p := PlanSync(AppliedOf(v1), v2)

	check := func(what string, got map[string][]string, want map[string][]string) {
		t.Helper()

		if len(got) != len(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}

		for m, keys := range want {
			if !slices.Equal(got[m], keys) {
				t.Errorf("%s[%s] = %v, want %v", what, m, got[m], keys)
			}
		}
	}

	check("added", p.Added, map[string][]string{"web": {"/Secret/apps/web"}})
	check("changed", p.Changed, map[string][]string{"cilium": {"/ConfigMap/kube-system/cilium-config"}, "web": {"/Service//app"}})
	check("pruned", p.Pruned, map[string][]string{"cilium": {"rbac.authorization.k8s.io/ClusterRole//cilium"}})

	if got := p.PruneKeys(); !slices.Equal(got, []string{"rbac.authorization.k8s.io/ClusterRole//cilium"}) {
		t.Errorf("PruneKeys = %v", got)
	}

	want := []string{
		"cilium: 1 changed (ConfigMap kube-system/cilium-config); 1 pruned (ClusterRole.rbac.authorization.k8s.io cilium)",
		"web: 1 added (Secret apps/web); 1 changed (Service app)",
	}
	if got := p.Summary(); !slices.Equal(got, want) {
		t.Errorf("Summary =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSummaryCountsLongLists(t *testing.T) {
	t.Parallel()

	var b strings.Builder
	for i := range 9 {
		b.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c" + string(rune('0'+i)) + ", namespace: x}\n")
	}

	objs, err := ParseManifests([]Manifest{{Name: "many", Contents: b.String()}})
	if err != nil {
		t.Fatal(err)
	}

	got := PlanSync(nil, objs).Summary()
	if len(got) != 1 || !strings.HasSuffix(got[0], "ConfigMap x/c5, and 3 more)") || !strings.HasPrefix(got[0], "many: 9 added (ConfigMap x/c0,") {
		t.Errorf("Summary = %v", got)
	}
}

// parseKeys parses manifests, which must parse, into their objects and the objects' keys.
func parseKeys(t *testing.T, manifests ...Manifest) (objs []Object, keys []string) {
	t.Helper()

	objs, err := ParseManifests(manifests)
	if err != nil {
		t.Fatal(err)
	}

	for _, o := range objs {
		keys = append(keys, o.Key)
	}

	return objs, keys
}
