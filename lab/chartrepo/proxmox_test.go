package chartrepo

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"
)

// object is a rendered Kubernetes object, decoded loosely.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Provisioner string            `json:"provisioner"`
	Parameters  map[string]string `json:"parameters"`
	Data        map[string]string `json:"data"`
	Spec        struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name  string   `json:"name"`
					Image string   `json:"image"`
					Args  []string `json:"args"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func loadArchive(t *testing.T, archive func(string) (string, error)) (*chart.Chart, string) {
	t.Helper()

	path, err := archive(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}

	return ch, path
}

// render is `helm template` of ch with values, client-only.
func render(t *testing.T, ch *chart.Chart, values map[string]any) map[string]object {
	t.Helper()

	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun = true
	inst.DryRunOption = "client"
	inst.ClientOnly = true
	inst.Replace = true
	inst.ReleaseName = ch.Metadata.Name
	inst.Namespace = "kube-system"

	rel, err := inst.Run(ch, values)
	if err != nil {
		t.Fatalf("rendering %s: %v", ch.Metadata.Name, err)
	}

	out := map[string]object{}

	for _, doc := range strings.Split(rel.Manifest, "\n---") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%s: %v\n%s", ch.Metadata.Name, err, doc)
		}

		if o.Kind != "" {
			out[o.Kind+"/"+o.Metadata.Name] = o
		}
	}

	return out
}

var labCluster = map[string]any{
	"url": "https://127.0.0.1:8006/api2/json", "insecure": true, "region": "lab",
	"token_id": "kubernetes-csi@pve!csi", "token_secret": "00000000-0000-4000-8000-000000000001",
}

func TestProxmoxCSIChartRenders(t *testing.T) {
	t.Parallel()

	ch, _ := loadArchive(t, ProxmoxCSIArchive)
	if ch.Metadata.Name != ProxmoxCSIChart || ch.Metadata.Version != ProxmoxCSIVersion || ch.Metadata.AppVersion != ProxmoxCSIAppVersion {
		t.Fatalf("chart %s %s (app %s)", ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion)
	}

	objs := render(t, ch, map[string]any{
		"config": map[string]any{"clusters": []any{labCluster}},
		"storageClass": []any{
			map[string]any{"name": "proxmox-data", "storage": "local-lvm", "reclaimPolicy": "Delete", "fstype": "xfs"},
			map[string]any{"name": "proxmox-shared", "storage": "nfs", "ssd": true},
		},
	})

	sc, ok := objs["StorageClass/proxmox-data"]
	if !ok || sc.Provisioner != "csi.proxmox.sinextra.dev" || sc.Parameters["storage"] != "local-lvm" ||
		sc.Parameters["csi.storage.k8s.io/fstype"] != "xfs" {
		t.Fatalf("StorageClass proxmox-data: %+v (objects %v)", sc, slices.Sorted(maps.Keys(objs)))
	}

	if sc := objs["StorageClass/proxmox-shared"]; sc.Parameters["ssd"] != "true" || sc.Parameters["csi.storage.k8s.io/fstype"] != "ext4" {
		t.Fatalf("StorageClass proxmox-shared: %+v", sc)
	}

	ctrl, ok := objs["Deployment/proxmox-csi-plugin-controller"]
	if !ok || ctrl.Metadata.Namespace != "kube-system" || len(ctrl.Spec.Template.Spec.Containers) == 0 ||
		ctrl.Spec.Template.Spec.Containers[0].Image != "ghcr.io/sergelogvinov/proxmox-csi-controller:"+ProxmoxCSIAppVersion {
		t.Fatalf("controller Deployment: %+v", ctrl)
	}

	if _, ok := objs["DaemonSet/proxmox-csi-plugin-node"]; !ok {
		t.Fatalf("no node DaemonSet: %v", slices.Sorted(maps.Keys(objs)))
	}

	if _, ok := objs["CSIDriver/csi.proxmox.sinextra.dev"]; !ok {
		t.Fatalf("no CSIDriver: %v", slices.Sorted(maps.Keys(objs)))
	}

	checkConfigSecret(t, objs["Secret/proxmox-csi-plugin"])
}

func TestProxmoxCCMChartRenders(t *testing.T) {
	t.Parallel()

	ch, _ := loadArchive(t, ProxmoxCCMArchive)
	if ch.Metadata.Name != ProxmoxCCMChart || ch.Metadata.Version != ProxmoxCCMVersion || ch.Metadata.AppVersion != ProxmoxCCMAppVersion {
		t.Fatalf("chart %s %s (app %s)", ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion)
	}

	values := map[string]any{"config": map[string]any{"clusters": []any{labCluster}}}
	objs := render(t, ch, values)

	dep, ok := objs["Deployment/proxmox-cloud-controller-manager"]
	if !ok || len(dep.Spec.Template.Spec.Containers) == 0 ||
		dep.Spec.Template.Spec.Containers[0].Image != "ghcr.io/sergelogvinov/proxmox-cloud-controller-manager:"+ProxmoxCCMAppVersion ||
		!slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--controllers=cloud-node,cloud-node-lifecycle") {
		t.Fatalf("Deployment: %+v (objects %v)", dep, slices.Sorted(maps.Keys(objs)))
	}

	checkConfigSecret(t, objs["Secret/proxmox-cloud-controller-manager"])

	values["useDaemonSet"] = true
	if _, ok := render(t, ch, values)["DaemonSet/proxmox-cloud-controller-manager"]; !ok {
		t.Fatal("useDaemonSet renders no DaemonSet")
	}
}

// checkConfigSecret requires the plugin's config.yaml to hold the cluster given in the values.
func checkConfigSecret(t *testing.T, s object) {
	t.Helper()

	raw, err := base64.StdEncoding.DecodeString(s.Data["config.yaml"])
	if err != nil || s.Kind != "Secret" {
		t.Fatalf("config Secret %+v: %v", s, err)
	}

	var cfg struct {
		Clusters []map[string]any `json:"clusters"`
	}

	if err := yaml.Unmarshal(raw, &cfg); err != nil || len(cfg.Clusters) != 1 || cfg.Clusters[0]["region"] != "lab" ||
		cfg.Clusters[0]["token_id"] != labCluster["token_id"] {
		t.Fatalf("config.yaml %s: %v", raw, err)
	}
}

func TestProxmoxChartsArchives(t *testing.T) {
	t.Parallel()

	for _, archive := range []func(string) (string, error){ProxmoxCSIArchive, ProxmoxCCMArchive} {
		ch, path := loadArchive(t, archive)

		if filepath.Base(path) != ch.Metadata.Name+"-"+ch.Metadata.Version+".tgz" {
			t.Errorf("archive %s", path)
		}

		var names []string
		for _, f := range ch.Templates {
			names = append(names, f.Name)
		}

		// go:embed drops files starting with "_" or "." unless told otherwise
		if !slices.Contains(names, "templates/_helpers.tpl") {
			t.Errorf("%s templates: %v", ch.Metadata.Name, names)
		}
	}
}

func TestRepositoryServesTheProxmoxCharts(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()

	archives, err := ProxmoxArchives(dir)
	if err != nil {
		t.Fatal(err)
	}

	srv, err := Repository(t.Context(), archives...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	res, err := http.Get(srv.URL + "/index.yaml")
	if err != nil {
		t.Fatal(err)
	}

	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()

	idxFile := filepath.Join(dir, "index.yaml")
	if err := os.WriteFile(idxFile, body, 0o644); err != nil {
		t.Fatal(err)
	}

	idx, err := repo.LoadIndexFile(idxFile)
	if err != nil {
		t.Fatal(err)
	}

	for i, want := range [][2]string{{ProxmoxCSIChart, ProxmoxCSIVersion}, {ProxmoxCCMChart, ProxmoxCCMVersion}} {
		cv, err := idx.Get(want[0], want[1])
		if err != nil {
			t.Fatalf("index: %v", err)
		}

		data, err := os.ReadFile(archives[i])
		if err != nil {
			t.Fatal(err)
		}

		sum := sha256.Sum256(data)
		if cv.Digest != hex.EncodeToString(sum[:]) || len(cv.URLs) != 1 {
			t.Fatalf("%s: digest %s urls %v, want the archive's sha256 %x", want[0], cv.Digest, cv.URLs, sum)
		}

		got, err := http.Get(srv.URL + "/" + cv.URLs[0])
		if err != nil {
			t.Fatal(err)
		}

		served, _ := io.ReadAll(got.Body)
		_ = got.Body.Close()

		if sha256.Sum256(served) != sum {
			t.Fatalf("%s: served archive differs", want[0])
		}
	}
}
