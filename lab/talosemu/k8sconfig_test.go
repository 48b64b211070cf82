package talosemu

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/constants"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosmanifests"
)

const (
	factsKube      = "1.33.4" // not the machinery's default, so images prove they were read
	factsEndpoint  = "https://127.0.0.10:6443"
	factsNamespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: lab\n"
)

// factsPatches turn a generated control-plane configuration into one with CNI none, an inline
// manifest, non-default pod and service subnets and a static hostname, wherever the contract keeps
// these: the v1alpha1 document up to 1.13, the HostnameConfig document from 1.12, the Kube*
// documents from 1.14 (the generated KubeFlannelCNIConfig deleted, as CNI none is written there).
func factsPatches(vc *config.VersionContract) []string {
	indented := "      " + strings.ReplaceAll(strings.TrimSuffix(factsNamespace, "\n"), "\n", "\n        ")
	legacyCluster := "cluster:\n  network:\n    cni:\n      name: none\n" +
		"    podSubnets: [10.200.0.0/16]\n    serviceSubnets: [10.100.0.0/16]\n" +
		"  inlineManifests:\n    - name: lab-ns\n      contents: |\n  " + indented + "\n"
	hostnameDoc := "apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\nhostname: cp-1\n"

	switch {
	case vc.MultidocKubernetesConfigSupported():
		return []string{hostnameDoc + "---\n" +
			"apiVersion: v1alpha1\nkind: KubeFlannelCNIConfig\n$patch: delete\n---\n" +
			"apiVersion: v1alpha1\nkind: KubeNetworkConfig\npodSubnets: [10.200.0.0/16]\nserviceSubnets: [10.100.0.0/16]\n---\n" +
			"apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: lab-ns\nmanifest: |\n  " +
			strings.ReplaceAll(strings.TrimSuffix(factsNamespace, "\n"), "\n", "\n  ") + "\n"}
	case vc.MultidocNetworkConfigSupported():
		return []string{legacyCluster, hostnameDoc}
	default:
		return []string{legacyCluster + "machine:\n  network:\n    hostname: cp-1\n"}
	}
}

// factsConfig generates a control plane's configuration with machinery's generate for contract
// version, patched by factsPatches, and loads it back as a node would.
func factsConfig(t *testing.T, version string) (config.Provider, *Bundle) {
	t.Helper()

	b, err := SharedBundle()
	if err != nil {
		t.Fatal(err)
	}

	vc, err := config.ParseContractFromVersion(version)
	if err != nil {
		t.Fatal(err)
	}

	in, err := generate.NewInput("lab", factsEndpoint, factsKube,
		generate.WithVersionContract(vc),
		generate.WithSecretsBundle(b.Secrets),
		generate.WithInstallDisk("/dev/sda"),
		generate.WithDNSDomain("lab.internal"),
		generate.WithAdditionalSubjectAltNames([]string{"api.lab.example"}),
	)
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := in.Config(machine.TypeControlPlane)
	if err != nil {
		t.Fatal(err)
	}

	patches, err := configpatcher.LoadPatches(factsPatches(vc))
	if err != nil {
		t.Fatal(err)
	}

	out, err := configpatcher.Apply(configpatcher.WithConfig(cfg), patches)
	if err != nil {
		t.Fatalf("patching: %v", err)
	}

	if cfg, err = out.Config(); err != nil {
		t.Fatal(err)
	}

	raw, err := cfg.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		t.Fatal(err)
	}

	loaded, err := configloader.NewFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}

	// The patched configuration must be one Talos accepts, or the test proves nothing.
	if _, err := loaded.ValidateAsClient(installedMode{NocloudMode{}}); err != nil {
		t.Fatalf("the %s configuration is invalid: %v\n%s", version, err, raw)
	}

	return loaded, b
}

// The emulator reads the same facts from a control plane's configuration whichever contract
// generated it: the single v1alpha1 document (1.11), the v1alpha1 document with a HostnameConfig
// (1.12, 1.13) or the Kube* documents (1.14) where the Kubernetes settings moved.
func TestFactsAreReadFromEveryContract(t *testing.T) {
	t.Parallel()

	for _, version := range []string{"v1.11", "v1.12", "v1.13", "v1.14.0"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()

			cfg, b := factsConfig(t, version)

			if version == "v1.14.0" && !cfg.Has("KubeAPIServerConfig") {
				t.Fatal("contract 1.14 generated no KubeAPIServerConfig: the test does not cover the Kube* documents")
			}

			checkManifestFacts(t, cfg)
			checkKubernetesFacts(t, cfg, b)
		})
	}
}

func checkManifestFacts(t *testing.T, cfg config.Config) {
	t.Helper()

	f := talosmanifests.FactsOf(cfg)

	got := fmt.Sprintf("cni=%s pods=%v services=%v domain=%s dns=%s proxy=%v:%s coredns=%v:%s external=%d",
		f.CNI, f.PodCIDRs, f.ServiceCIDRs, f.DNSDomain, f.DNSServiceIP,
		f.ProxyEnabled, f.ProxyImage, f.CoreDNSEnabled, f.CoreDNSImage, len(f.External))
	want := fmt.Sprintf("cni=none pods=[10.200.0.0/16] services=[10.100.0.0/16] domain=lab.internal dns=10.100.0.10 "+
		"proxy=true:registry.k8s.io/kube-proxy:v%s coredns=true:%s:%s external=0",
		factsKube, constants.CoreDNSImage, constants.DefaultCoreDNSVersion)

	if got != want {
		t.Errorf("facts\n got %s\nwant %s", got, want)
	}

	if len(f.Inline) != 1 || f.Inline[0].Name != "lab-ns" || f.Inline[0].Contents != factsNamespace {
		t.Errorf("inline manifests = %+v", f.Inline)
	}

	// What Talos applies: no Flannel for CNI none, the inline manifest last.
	sources, err := talosmanifests.Manifests(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, s := range sources {
		names = append(names, s.Name)
	}

	if want := []string{"11-core-dns", "10-kube-proxy", "lab-ns"}; !slices.Equal(names, want) {
		t.Errorf("manifests = %v, want %v", names, want)
	}
}

func checkKubernetesFacts(t *testing.T, cfg config.Config, b *Bundle) {
	t.Helper()

	certs := b.Secrets.Certs

	if u := clusterEndpoint(cfg); u == nil || u.String() != factsEndpoint || clusterName(cfg) != "lab" {
		t.Errorf("endpoint %v, cluster name %q", u, clusterName(cfg))
	}

	if endpoint, err := apiEndpoint(cfg); err != nil || endpoint != "127.0.0.10:6443" {
		t.Errorf("API endpoint %q, %v", endpoint, err)
	}

	issuing, accepted := kubernetesCA(cfg)
	if issuing == nil || !bytes.Equal(issuing.Crt, certs.K8s.Crt) || !bytes.Equal(issuing.Key, certs.K8s.Key) || len(accepted) != 0 {
		t.Errorf("Kubernetes CA %v, accepted %d", issuing != nil, len(accepted))
	}

	if ca := aggregatorCA(cfg); ca == nil || !bytes.Equal(ca.Crt, certs.K8sAggregator.Crt) {
		t.Error("aggregator CA not read")
	}

	if key := serviceAccountKey(cfg); key == nil || !bytes.Equal(key.Key, certs.K8sServiceAccount.Key) {
		t.Error("service account key not read")
	}

	if ca := cfg.Cluster().Etcd().CA(); ca == nil || !bytes.Equal(ca.Crt, certs.Etcd.Crt) || !bytes.Equal(ca.Key, certs.Etcd.Key) {
		t.Error("etcd CA not read")
	}

	if sans := apiServerCertSANs(cfg); !slices.Contains(sans, "api.lab.example") {
		t.Errorf("API server cert SANs = %v", sans)
	}

	apiServer, controllerManager, scheduler := controlPlaneImages(cfg)
	images := []string{apiServer, controllerManager, scheduler, kubeletImage(cfg)}

	if want := []string{
		"registry.k8s.io/kube-apiserver:v" + factsKube, "registry.k8s.io/kube-controller-manager:v" + factsKube,
		"registry.k8s.io/kube-scheduler:v" + factsKube, "ghcr.io/siderolabs/kubelet:v" + factsKube,
	}; !slices.Equal(images, want) {
		t.Errorf("images = %v, want %v", images, want)
	}

	labels := slices.Sorted(maps.Keys(nodeLabels(cfg)))
	if !slices.Contains(labels, constants.LabelNodeRoleControlPlane) || allowSchedulingOnControlPlanes(cfg) {
		t.Errorf("node labels %v, scheduling on control planes %v", labels, allowSchedulingOnControlPlanes(cfg))
	}

	if h := configuredHostname(cfg); h != "cp-1" {
		t.Errorf("hostname = %q", h)
	}

	if cfg.Machine() == nil || !cfg.Machine().Type().IsControlPlane() {
		t.Error("machine type not read")
	}
}
