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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"
)

// object is a rendered Kubernetes object, decoded loosely; raw is its YAML, for decodeAs.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Provisioner string            `json:"provisioner"`
	Parameters  map[string]string `json:"parameters"`
	Data        map[string]string `json:"data"`

	raw []byte
}

// clusterScoped are the kinds of the charts' objects that have no namespace.
var clusterScoped = []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "CSIDriver", "StorageClass"}

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

// render is `helm template` of ch with values as release ch.Metadata.Name in namespace,
// client-only. Every namespaced object must be in namespace (or kube-system), and no
// cluster-scoped one may carry a namespace.
func render(t *testing.T, ch *chart.Chart, namespace string, values map[string]any) map[string]object {
	t.Helper()

	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun = true
	inst.DryRunOption = "client"
	inst.ClientOnly = true
	inst.Replace = true
	inst.ReleaseName = ch.Metadata.Name
	inst.Namespace = namespace

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

		if o.Kind == "" {
			continue
		}

		key := o.Kind + "/" + o.Metadata.Name
		if _, dup := out[key]; dup {
			t.Fatalf("%s renders %s twice", ch.Metadata.Name, key)
		}

		ns, global := o.Metadata.Namespace, slices.Contains(clusterScoped, o.Kind)
		if global && ns != "" || !global && ns != namespace && ns != "kube-system" {
			t.Errorf("%s: %s has namespace %q (release namespace %s)", ch.Metadata.Name, key, ns, namespace)
		}

		o.raw = []byte(doc)
		out[key] = o
	}

	return out
}

// decodeAs decodes the object key of objs strictly into a T.
func decodeAs[T any](t *testing.T, objs map[string]object, key string) *T {
	t.Helper()

	o, ok := objs[key]
	if !ok {
		t.Fatalf("no %s among %v", key, slices.Sorted(maps.Keys(objs)))
	}

	v := new(T)
	if err := yaml.UnmarshalStrict(o.raw, v); err != nil {
		t.Fatalf("%s: %v\n%s", key, err, o.raw)
	}

	return v
}

var labCluster = map[string]any{
	"url": "https://127.0.0.1:8006/api2/json", "insecure": true, "region": "lab",
	"token_id": "kubernetes-csi@pve!csi", "token_secret": "00000000-0000-4000-8000-000000000001",
}

// The CSI plugin's stand-in chart with its own config Secret: StorageClasses with the computed
// parameters over extraParameters, the controller mounting the chart's Secret.
func TestProxmoxCSIChartRenders(t *testing.T) {
	t.Parallel()

	ch, _ := loadArchive(t, ProxmoxCSIArchive)
	if ch.Metadata.Name != ProxmoxCSIChart || ch.Metadata.Version != ProxmoxCSIVersion || ch.Metadata.AppVersion != ProxmoxCSIAppVersion {
		t.Fatalf("chart %s %s (app %s)", ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion)
	}

	objs := render(t, ch, "kube-system", map[string]any{
		"createNamespace": true, // never for kube-system
		"config":          map[string]any{"clusters": []any{labCluster}},
		"storageClass": []any{
			map[string]any{"name": "proxmox-data", "storage": "local-lvm", "reclaimPolicy": "Delete", "fstype": "xfs"},
			map[string]any{
				"name": "proxmox-shared", "storage": "nfs", "ssd": true, "cache": "writethrough", "reclaimPolicy": "Retain",
				"volumeBindingMode": "Immediate", "mountOptions": []any{"discard"},
				"extraParameters": map[string]any{"storage": "ignored", "csi.storage.k8s.io/node-stage-secret-name": "s"},
			},
		},
	})

	sc, ok := objs["StorageClass/proxmox-data"]
	if !ok || sc.Provisioner != "csi.proxmox.sinextra.dev" || !maps.Equal(sc.Parameters, map[string]string{
		"storage": "local-lvm", "csi.storage.k8s.io/fstype": "xfs",
	}) {
		t.Fatalf("StorageClass proxmox-data: %+v (objects %v)", sc, slices.Sorted(maps.Keys(objs)))
	}

	data := decodeAs[storagev1.StorageClass](t, objs, "StorageClass/proxmox-data")
	if data.AllowVolumeExpansion == nil || !*data.AllowVolumeExpansion || data.ReclaimPolicy == nil || *data.ReclaimPolicy != "Delete" ||
		data.VolumeBindingMode == nil || *data.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Fatalf("StorageClass proxmox-data: %+v", data)
	}

	if sc := objs["StorageClass/proxmox-shared"]; !maps.Equal(sc.Parameters, map[string]string{
		"storage": "nfs", "csi.storage.k8s.io/fstype": "ext4", "ssd": "true", "cache": "writethrough",
		"csi.storage.k8s.io/node-stage-secret-name": "s",
	}) {
		t.Fatalf("StorageClass proxmox-shared: %+v", sc)
	}

	shared := decodeAs[storagev1.StorageClass](t, objs, "StorageClass/proxmox-shared")
	if *shared.ReclaimPolicy != "Retain" || *shared.VolumeBindingMode != storagev1.VolumeBindingImmediate ||
		!slices.Equal(shared.MountOptions, []string{"discard"}) {
		t.Fatalf("StorageClass proxmox-shared: %+v", shared)
	}

	ctrl := decodeAs[appsv1.Deployment](t, objs, "Deployment/proxmox-csi-plugin-controller")
	if c := ctrl.Spec.Template.Spec.Containers; len(c) == 0 || c[0].Image != "ghcr.io/sergelogvinov/proxmox-csi-controller:"+ProxmoxCSIAppVersion {
		t.Fatalf("controller Deployment: %+v", ctrl)
	}

	if v := ctrl.Spec.Template.Spec.Volumes; !slices.ContainsFunc(v, func(v corev1.Volume) bool {
		return v.Name == "cloud-config" && v.Secret != nil && v.Secret.SecretName == "proxmox-csi-plugin" && len(v.Secret.Items) == 0
	}) {
		t.Fatalf("controller volumes: %+v", v)
	}

	if _, ok := objs["Namespace/kube-system"]; ok {
		t.Fatal("createNamespace renders kube-system")
	}

	checkConfigSecret(t, objs["Secret/proxmox-csi-plugin"])
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
