package talosemu

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	stdx509 "crypto/x509"
	"encoding/base64"
	"fmt"
	"text/template"
	"time"

	"github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Kubeconfig streams an admin kubeconfig as a .tar.gz holding one file named "kubeconfig", like
// machined. Real Talos hands it out on any configured control plane; the emulator waits until the
// node runs etcd, because before that no Kubernetes API could answer it.
func (s *machineService) Kubeconfig(_ *emptypb.Empty, srv grpc.ServerStreamingServer[common.Data]) error {
	snap := s.node.snapshot()

	switch {
	case snap.active == nil:
		return notInMaintenance("Kubeconfig")
	case !snap.controlPlane:
		return status.Error(codes.Unimplemented, "kubeconfig is only available on control plane nodes")
	case !snap.etcdMember:
		return status.Error(codes.FailedPrecondition,
			"talosemu: no kubeconfig before etcd runs on this control plane (bootstrap the cluster first)")
	}

	kubeconfig, err := adminKubeconfig(snap.active.cfg, time.Now())
	if err != nil {
		return status.Errorf(codes.Internal, "generating the admin kubeconfig: %v", err)
	}

	archive, err := tarGz("kubeconfig", kubeconfig)
	if err != nil {
		return status.Errorf(codes.Internal, "packing the kubeconfig: %v", err)
	}

	return srv.Send(&common.Data{Bytes: archive})
}

// kubeconfigTemplate is Talos' admin kubeconfig layout (siderolabs/talos pkg/kubeconfig).
var kubeconfigTemplate = template.Must(template.New("kubeconfig").Parse(`apiVersion: v1
kind: Config
clusters:
- name: {{ .Cluster }}
  cluster:
    server: {{ .Server }}
    certificate-authority-data: {{ .CA }}
users:
- name: admin@{{ .Cluster }}
  user:
    client-certificate-data: {{ .Cert }}
    client-key-data: {{ .Key }}
contexts:
- context:
    cluster: {{ .Cluster }}
    namespace: default
    user: admin@{{ .Cluster }}
  name: admin@{{ .Cluster }}
current-context: admin@{{ .Cluster }}
`))

// adminKubeconfig issues an admin client certificate from the Kubernetes CA (cluster.ca) with the
// configured common name, organization and lifetime, for the cluster endpoint.
func adminKubeconfig(cfg config.Config, now time.Time) ([]byte, error) {
	issuing, accepted := kubernetesCA(cfg)
	if issuing == nil || len(issuing.Key) == 0 {
		return nil, fmt.Errorf("cluster.ca has no key")
	}

	endpoint := clusterEndpoint(cfg)
	if endpoint == nil {
		return nil, fmt.Errorf("the configuration has no cluster.controlPlane.endpoint")
	}

	ca, err := x509.NewCertificateAuthorityFromCertificateAndKey(issuing)
	if err != nil {
		return nil, fmt.Errorf("loading cluster.ca: %w", err)
	}

	admin := cfg.Cluster().AdminKubeconfig()

	kp, err := x509.NewKeyPair(ca,
		x509.CommonName(admin.CommonName()),
		x509.Organization(admin.CertOrganization()),
		x509.NotBefore(now.Add(-time.Minute)),
		x509.NotAfter(now.Add(admin.CertLifetime())),
		x509.ExtKeyUsage([]stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth}),
	)
	if err != nil {
		return nil, fmt.Errorf("issuing the admin certificate: %w", err)
	}

	var caPEM []byte
	for _, ca := range accepted {
		caPEM = append(caPEM, ca.Crt...)
	}

	caPEM = append(caPEM, issuing.Crt...)

	enc := base64.StdEncoding.EncodeToString

	var out bytes.Buffer

	err = kubeconfigTemplate.Execute(&out, map[string]string{
		"Cluster": clusterName(cfg),
		"Server":  endpoint.String(),
		"CA":      enc(caPEM),
		"Cert":    enc(kp.CrtPEM),
		"Key":     enc(kp.KeyPEM),
	})

	return out.Bytes(), err
}

// tarGz packs one regular file into a gzipped tar archive.
func tarGz(name string, data []byte) ([]byte, error) {
	var buf bytes.Buffer

	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)

	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     int64(len(data)),
		Mode:     0o600,
		ModTime:  time.Now(),
	}); err != nil {
		return nil, err
	}

	if _, err := tw.Write(data); err != nil {
		return nil, err
	}

	if err := tw.Close(); err != nil {
		return nil, err
	}

	if err := zw.Close(); err != nil {
		return nil, err
	}

	return buf.Bytes(), nil
}
