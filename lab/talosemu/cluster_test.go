package talosemu_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"slices"
	"strings"
	"testing"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"go.yaml.in/yaml/v4"
	"google.golang.org/grpc/codes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

func TestBootstrapOnceThenKubeconfig(t *testing.T) {
	t.Parallel()

	n := startNode(t, talosemu.Options{})
	install(t, n, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	c := secureClient(t, n)

	_, err := c.Kubeconfig(nodeCtx(t, n))
	wantCode(t, err, codes.FailedPrecondition)

	if err := c.Bootstrap(nodeCtx(t, n), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}

	waitState(t, n, talosemu.StateBootstrapped)

	err = c.Bootstrap(nodeCtx(t, n), &machineapi.BootstrapRequest{})
	wantCode(t, err, codes.AlreadyExists)

	if !strings.Contains(err.Error(), "etcd data directory is not empty") {
		t.Errorf("second bootstrap: %v", err)
	}

	// client.Kubeconfig unpacks the tar.gz with its single "kubeconfig" file, as the provider does.
	raw, err := c.Kubeconfig(nodeCtx(t, n))
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}

	checkAdminKubeconfig(t, raw, sharedBundle(t).Secrets.Certs.K8s.Crt)

	services, err := c.ServiceList(nodeCtx(t, n))
	if err != nil {
		t.Fatal(err)
	}

	health := map[string]bool{}
	for _, s := range services.Messages[0].Services {
		health[s.Id] = s.State == "Running" && s.Health.GetHealthy()
	}

	for _, id := range []string{"apid", "etcd", "kubelet", "trustd"} {
		if !health[id] {
			t.Errorf("service %s not running and healthy: %v", id, services.Messages[0].Services)
		}
	}
}

// kubeconfigFile mirrors the parts of client-go's clientcmd v1 Config the Talos provider reads.
type kubeconfigFile struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Clusters   []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server string `yaml:"server"`
			CA     string `yaml:"certificate-authority-data"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			Cert string `yaml:"client-certificate-data"`
			Key  string `yaml:"client-key-data"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			User      string `yaml:"user"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	} `yaml:"contexts"`
	CurrentContext string `yaml:"current-context"`
}

// checkAdminKubeconfig parses raw strictly and checks that its current context reaches the
// cluster endpoint with the cluster CA and a system:masters client certificate issued by it.
func checkAdminKubeconfig(t *testing.T, raw, clusterCA []byte) {
	t.Helper()

	var kc kubeconfigFile

	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)

	if err := dec.Decode(&kc); err != nil {
		t.Fatalf("kubeconfig does not parse: %v\n%s", err, raw)
	}

	ctxIdx := slices.IndexFunc(kc.Contexts, func(c struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			User      string `yaml:"user"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	}) bool {
		return c.Name == kc.CurrentContext
	})
	if kc.APIVersion != "v1" || kc.Kind != "Config" || ctxIdx < 0 || len(kc.Clusters) != 1 || len(kc.Users) != 1 ||
		kc.Contexts[ctxIdx].Context.Cluster != kc.Clusters[0].Name || kc.Contexts[ctxIdx].Context.User != kc.Users[0].Name {
		t.Fatalf("kubeconfig structure: %+v", kc)
	}

	if kc.Clusters[0].Cluster.Server != talosemu.BundleEndpoint {
		t.Errorf("server = %q", kc.Clusters[0].Cluster.Server)
	}

	caPEM := decodeB64(t, kc.Clusters[0].Cluster.CA)
	if !bytes.Equal(caPEM, clusterCA) {
		t.Fatalf("certificate-authority-data is not the cluster CA")
	}

	pair, err := tls.X509KeyPair(decodeB64(t, kc.Users[0].User.Cert), decodeB64(t, kc.Users[0].User.Key))
	if err != nil {
		t.Fatalf("client certificate and key: %v", err)
	}

	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}

	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca)

	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate does not chain to the cluster CA: %v", err)
	}

	if !slices.Equal(leaf.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("organization = %v", leaf.Subject.Organization)
	}
}

func decodeB64(t *testing.T, s string) []byte {
	t.Helper()

	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("base64: %v", err)
	}

	return b
}

func TestWorkerRefusesControlPlaneCalls(t *testing.T) {
	t.Parallel()

	cluster := newCluster(t)
	worker := startNode(t, talosemu.Options{Cluster: cluster})

	// A worker's config carries the OS CA without its key: its API certificate comes from a control
	// plane (trustd), so it stays down until one is up.
	_, err := insecureClient(t, worker).ApplyConfiguration(nodeCtx(t, worker), &machineapi.ApplyConfigurationRequest{
		Data: machineConfig(t, machine.TypeWorker, "w-1"),
	})
	if err != nil {
		t.Fatal(err)
	}

	waitState(t, worker, talosemu.StateInstalling)

	cp := startNode(t, talosemu.Options{Cluster: cluster})
	install(t, cp, machineConfig(t, machine.TypeControlPlane, "cp-1"))
	waitState(t, worker, talosemu.StateInstalled)

	c := secureClient(t, worker)

	err = c.Bootstrap(nodeCtx(t, worker), &machineapi.BootstrapRequest{})
	wantCode(t, err, codes.FailedPrecondition)

	if !strings.Contains(err.Error(), "bootstrap can only be performed on a control plane node") {
		t.Errorf("bootstrap on a worker: %v", err)
	}

	_, err = c.Kubeconfig(nodeCtx(t, worker))
	wantCode(t, err, codes.Unimplemented)

	_, err = c.EtcdMemberList(nodeCtx(t, worker), &machineapi.EtcdMemberListRequest{})
	wantCode(t, err, codes.Unimplemented)

	_, err = takeSnapshot(nodeCtx(t, worker), t, worker)
	wantCode(t, err, codes.Unimplemented)

	if !strings.Contains(err.Error(), "etcd snapshot is only available on control plane nodes") {
		t.Errorf("snapshot on a worker: %v", err)
	}

	_, err = c.EtcdRecover(nodeCtx(t, worker), strings.NewReader("not a snapshot"))
	wantCode(t, err, codes.Unimplemented)

	if !strings.Contains(err.Error(), "etcd recover is only available on control plane nodes") {
		t.Errorf("upload to a worker: %v", err)
	}
}

func TestSecondControlPlaneJoinsEtcd(t *testing.T) {
	t.Parallel()

	cluster := newCluster(t)
	cp1 := startNode(t, talosemu.Options{Cluster: cluster})
	cp2 := startNode(t, talosemu.Options{Cluster: cluster})

	install(t, cp1, machineConfig(t, machine.TypeControlPlane, "cp-1"))

	if err := secureClient(t, cp1).Bootstrap(nodeCtx(t, cp1), &machineapi.BootstrapRequest{}); err != nil {
		t.Fatal(err)
	}

	install(t, cp2, machineConfig(t, machine.TypeControlPlane, "cp-2"))
	waitState(t, cp2, talosemu.StateBootstrapped)

	c := secureClient(t, cp1)

	members, err := c.EtcdMemberList(nodeCtx(t, cp1), &machineapi.EtcdMemberListRequest{QueryLocal: true})
	if err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, m := range members.Messages[0].Members {
		got = append(got, m.Hostname+" "+m.PeerUrls[0])
	}

	slices.Sort(got)

	want := []string{"cp-1 https://" + cp1.IP() + ":2380", "cp-2 https://" + cp2.IP() + ":2380"}
	if !slices.Equal(got, want) {
		t.Fatalf("members = %v, want %v", got, want)
	}

	// Joined means etcd data exists: bootstrapping cp-2 is refused too.
	wantCode(t, secureClient(t, cp2).Bootstrap(nodeCtx(t, cp2), &machineapi.BootstrapRequest{}), codes.AlreadyExists)

	// apid routing through cp-1: `node` proxies to cp-2, `nodes` fans out and stamps hostnames.
	proxied, err := c.Version(client.WithNode(t.Context(), cp2.IP()))
	if err != nil || proxied.Messages[0].Version.Tag == "" {
		t.Fatalf("Version proxied to cp-2: %v %v", proxied, err)
	}

	fanned, err := c.ServiceList(client.WithNodes(t.Context(), cp1.IP(), cp2.IP()))
	if err != nil || len(fanned.Messages) != 2 ||
		fanned.Messages[0].Metadata.GetHostname() != cp1.IP() || fanned.Messages[1].Metadata.GetHostname() != cp2.IP() {
		t.Fatalf("ServiceList fanned out: %v %v", fanned, err)
	}

	_, err = c.Version(client.WithNode(t.Context(), "127.0.77.254"))
	wantCode(t, err, codes.Unavailable)
}
