package flux

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
	"sigs.k8s.io/yaml"
)

// TestSyncIsFluxBootstrap compares Sync with what flux2's sync.Generate (behind `flux bootstrap
// git`'s gotk-sync.yaml) wrote for the same inputs; tools/fluxgen writes the golden file.
func TestSyncIsFluxBootstrap(t *testing.T) {
	b, err := os.ReadFile("testdata/sync-golden.json")
	if err != nil {
		t.Fatal(err)
	}

	var cases []struct{ URL, Branch, Path, Want string }
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}

	if len(cases) == 0 {
		t.Fatal("no golden cases")
	}

	for _, c := range cases {
		got, err := Sync(SyncOptions{URL: c.URL, Branch: c.Branch, Path: c.Path})
		if err != nil {
			t.Errorf("Sync(%q, %q, %q): %v", c.URL, c.Branch, c.Path, err)

			continue
		}

		if got != c.Want {
			t.Errorf("Sync(%q, %q, %q):\n%s\nflux bootstrap writes:\n%s", c.URL, c.Branch, c.Path, got, c.Want)
		}
	}
}

// syncDocs splits Sync's output into its two documents.
func syncDocs(t *testing.T, s string) (git, ks string) {
	t.Helper()

	docs := strings.Split(s, "\n---\n")
	if len(docs) != 3 || docs[0] != genWarning {
		t.Fatalf("Sync wrote %d documents, want flux's header and two:\n%s", len(docs), s)
	}

	return docs[1], docs[2]
}

func TestSyncDecodesIntoFluxTypes(t *testing.T) {
	for _, o := range []SyncOptions{
		{URL: "ssh://git@127.0.0.1:40022/fleet.git", Path: "clusters/lab"},
		{URL: "https://git.example.com/org/fleet", Branch: "feature/x", Path: "./apps/"},
	} {
		s, err := Sync(o)
		if err != nil {
			t.Fatal(err)
		}

		gitDoc, ksDoc := syncDocs(t, s)

		var git sourcev1.GitRepository
		if err := yaml.UnmarshalStrict([]byte(gitDoc), &git); err != nil {
			t.Fatalf("GitRepository does not decode into source-controller's type: %v\n%s", err, gitDoc)
		}

		branch := o.Branch
		if branch == "" {
			branch = DefaultBranch
		}

		if git.APIVersion != sourcev1.GroupVersion.String() || git.Kind != sourcev1.GitRepositoryKind ||
			git.Name != Name || git.Namespace != Namespace || git.Spec.URL != o.URL ||
			git.Spec.Reference == nil || git.Spec.Reference.Branch != branch ||
			git.Spec.SecretRef == nil || git.Spec.SecretRef.Name != Name || git.Spec.Interval.Duration != time.Minute {
			t.Errorf("GitRepository %+v", git)
		}

		var ks kustomizev1.Kustomization
		if err := yaml.UnmarshalStrict([]byte(ksDoc), &ks); err != nil {
			t.Fatalf("Kustomization does not decode into kustomize-controller's type: %v\n%s", err, ksDoc)
		}

		wantPath := "./" + strings.TrimPrefix(o.Path, "./")
		if ks.APIVersion != kustomizev1.GroupVersion.String() || ks.Kind != kustomizev1.KustomizationKind ||
			ks.Name != Name || ks.Namespace != Namespace || ks.Spec.Path != wantPath || !ks.Spec.Prune ||
			ks.Spec.SourceRef.Kind != sourcev1.GitRepositoryKind || ks.Spec.SourceRef.Name != Name ||
			ks.Spec.SourceRef.Namespace != "" || ks.Spec.Interval.Duration != 10*time.Minute {
			t.Errorf("Kustomization %+v", ks.Spec)
		}
	}
}

// TestSyncWithInstall applies as the component does: the install manifests, the sync objects
// and the deploy key in one manifest sync, with no object twice.
func TestSyncWithInstall(t *testing.T) {
	install, err := Install()
	if err != nil {
		t.Fatal(err)
	}

	sync, err := Sync(SyncOptions{URL: "ssh://git@127.0.0.1:40022/fleet.git", Path: "clusters/lab"})
	if err != nil {
		t.Fatal(err)
	}

	key, pub := genKey(t)

	secret, err := DeployKeySecret(key, pub, knownHostsLine(t, "127.0.0.1", 40022))
	if err != nil {
		t.Fatal(err)
	}

	objs, err := day2.ParseManifests([]day2.Manifest{
		{Name: "flux", Contents: string(install)},
		{Name: "flux-sync", Contents: sync},
		{Name: "flux-secret", Contents: secret},
	})
	if err != nil {
		t.Fatal(err)
	}

	found := map[string]bool{}
	for _, o := range objs {
		found[o.Key] = true
	}

	for _, k := range []string{
		"source.toolkit.fluxcd.io/GitRepository/flux-system/flux-system",
		"kustomize.toolkit.fluxcd.io/Kustomization/flux-system/flux-system",
		"/Secret/flux-system/flux-system",
		"apps/Deployment/flux-system/source-controller",
	} {
		if !found[k] {
			t.Errorf("no %s", k)
		}
	}
}

func TestSyncRefuses(t *testing.T) {
	for _, o := range []SyncOptions{
		{URL: ""},
		{URL: "git@github.com:org/fleet.git"},
		{URL: "ftp://git.example.com/fleet.git"},
		{URL: "file:///srv/git/fleet.git"},
		{URL: "ssh://git@git.example.com"},
		{URL: "ssh:///fleet.git"},
		{URL: "ssh://git@git.example.com/fleet.git\n"},
		{URL: "ssh://git@git.example.com/fleet.git", Branch: "a b"},
		{URL: "ssh://git@git.example.com/fleet.git", Branch: "-f"},
		{URL: "ssh://git@git.example.com/fleet.git", Branch: "main..x"},
		{URL: "ssh://git@git.example.com/fleet.git", Branch: "x.lock"},
		{URL: "ssh://git@git.example.com/fleet.git", Branch: "refs/.hidden"},
		{URL: "ssh://git@git.example.com/fleet.git", Path: "/clusters/lab"},
		{URL: "ssh://git@git.example.com/fleet.git", Path: "../other"},
		{URL: "ssh://git@git.example.com/fleet.git", Path: "clusters/../../x"},
		{URL: "ssh://git@git.example.com/fleet.git", Path: "clusters\\lab"},
	} {
		if s, err := Sync(o); err == nil {
			t.Errorf("Sync(%+v) accepted:\n%s", o, s)
		}
	}
}
