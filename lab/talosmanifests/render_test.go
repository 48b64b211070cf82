package talosmanifests_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosmanifests"
)

func names(t *testing.T, patches ...string) []string {
	t.Helper()

	b, err := talosemu.SharedBundle()
	if err != nil {
		t.Fatal(err)
	}

	raw, err := b.MachineConfig(machine.TypeControlPlane, patches...)
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := configloader.NewFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}

	sources, err := talosmanifests.Manifests(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}

	var out []string

	for _, s := range sources {
		for _, d := range s.Documents {
			out = append(out, s.Name+":"+d.GetKind()+"/"+d.GetName())
		}
	}

	return out
}

// What Talos applies follows the configuration: default Flannel, kube-proxy and CoreDNS; none of
// them when disabled; a custom CNI's and the extra manifests fetched with their headers; inline
// manifests last, in order.
func TestManifestsFollowTheConfiguration(t *testing.T) {
	t.Parallel()

	got := strings.Join(names(t), " ")
	for _, want := range []string{"DaemonSet/kube-flannel", "DaemonSet/kube-proxy", "Deployment/coredns", "Service/kube-dns"} {
		if !strings.Contains(got, want) {
			t.Errorf("default manifests lack %s: %s", want, got)
		}
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "lab" {
			http.Error(w, "no token", http.StatusForbidden)

			return
		}

		_, _ = fmt.Fprintf(w, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from%s\n", strings.ReplaceAll(r.URL.Path, "/", "-"))
	}))
	defer srv.Close()

	got = strings.Join(names(t, fmt.Sprintf(`cluster:
  proxy:
    disabled: true
  coreDNS:
    disabled: true
  network:
    cni:
      name: custom
      urls: [%[1]s/cni]
  extraManifests: [%[1]s/extra]
  extraManifestHeaders:
    X-Token: lab
  inlineManifests:
    - name: a
      contents: |
        apiVersion: v1
        kind: Namespace
        metadata:
          name: a
`, srv.URL)), " ")

	want := srv.URL + "/cni:ConfigMap/from-cni " + srv.URL + "/extra:ConfigMap/from-extra a:Namespace/a"
	if got != want {
		t.Fatalf("manifests = %s\nwant %s", got, want)
	}
}

func TestParseRejectsDocumentsWithoutKind(t *testing.T) {
	t.Parallel()

	if _, err := talosmanifests.Parse("metadata:\n  name: x\n"); err == nil {
		t.Fatal("a document without kind parsed")
	}

	docs, err := talosmanifests.Parse("---\n# empty\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n")
	if err != nil || len(docs) != 1 {
		t.Fatalf("docs %v, %v", docs, err)
	}
}
