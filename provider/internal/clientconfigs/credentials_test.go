package clientconfigs

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"slices"
	"testing"
	"time"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"k8s.io/client-go/tools/clientcmd"
)

func input(t *testing.T) (Input, *x509.CertPool, *x509.CertPool) {
	t.Helper()

	b, err := secrets.NewBundle(secrets.NewClock(), config.TalosVersionCurrent)
	if err != nil {
		t.Fatal(err)
	}

	enc := func(p []byte) string { return base64.StdEncoding.EncodeToString(p) }
	pool := func(crt []byte) *x509.CertPool {
		p := x509.NewCertPool()
		p.AppendCertsFromPEM(crt)

		return p
	}

	return Input{
		ClusterName:    "homelab",
		Endpoint:       "https://10.0.0.10:6443",
		OSCA:           CertAndKey{enc(b.Certs.OS.Crt), enc(b.Certs.OS.Key)},
		KubernetesCA:   CertAndKey{enc(b.Certs.K8s.Crt), enc(b.Certs.K8s.Key)},
		TalosEndpoints: []string{"10.0.0.11"},
		TalosNodes:     []string{"10.0.0.11", "10.0.0.21"},
		Validity:       2 * time.Hour,
		Now:            time.Now(),
	}, pool(b.Certs.OS.Crt), pool(b.Certs.K8s.Crt)
}

func leaf(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()

	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("not PEM")
	}

	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}

	return c
}

func TestIssueSignsAdminCertificatesWithTheClustersCAs(t *testing.T) {
	in, osPool, k8sPool := input(t)

	got, err := Issue(in)
	if err != nil {
		t.Fatal(err)
	}

	if d := got.NotAfter.Sub(in.Now); d < 2*time.Hour-time.Minute || d > 2*time.Hour+time.Minute {
		t.Errorf("valid for %s, want 2h", d)
	}

	tc, err := clientconfig.FromString(got.Talosconfig)
	if err != nil {
		t.Fatal(err)
	}

	ctx := tc.Contexts["homelab"]
	if tc.Context != "homelab" || !slices.Equal(ctx.Endpoints, in.TalosEndpoints) || !slices.Equal(ctx.Nodes, in.TalosNodes) {
		t.Errorf("talosconfig context %+v", ctx)
	}

	crt, _ := base64.StdEncoding.DecodeString(ctx.Crt)
	tcrt := leaf(t, crt)
	if _, err := tcrt.Verify(x509.VerifyOptions{Roots: osPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the Talos client certificate is not the OS CA's: %v", err)
	}

	if !slices.Contains(tcrt.Subject.Organization, "os:admin") {
		t.Errorf("Talos client certificate roles %v, want os:admin", tcrt.Subject.Organization)
	}

	kc, err := clientcmd.Load([]byte(got.Kubeconfig))
	if err != nil {
		t.Fatal(err)
	}

	if kc.Clusters["homelab"].Server != in.Endpoint {
		t.Errorf("kubeconfig server %q", kc.Clusters["homelab"].Server)
	}

	kcrt := leaf(t, kc.AuthInfos["admin@homelab"].ClientCertificateData)
	if _, err := kcrt.Verify(x509.VerifyOptions{Roots: k8sPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the Kubernetes client certificate is not the cluster CA's: %v", err)
	}

	if !slices.Contains(kcrt.Subject.Organization, "system:masters") {
		t.Errorf("Kubernetes client groups %v", kcrt.Subject.Organization)
	}

	// A second issue is a new certificate.
	again, err := Issue(in)
	if err != nil || again.Kubeconfig == got.Kubeconfig || again.Talosconfig == got.Talosconfig {
		t.Errorf("reissued credentials are the same (%v)", err)
	}
}

func TestIssueRefusesBrokenSecrets(t *testing.T) {
	in, _, _ := input(t)
	in.OSCA.Key = "not base64!"

	if _, err := Issue(in); err == nil {
		t.Error("a broken CA key was accepted")
	}
}
