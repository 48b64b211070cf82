// Package clientconfigs issues the cluster's client credentials — the Talos API admin
// talosconfig and the Kubernetes admin kubeconfig — from the cluster's own CAs, in-process, as
// `talosctl gen config` and the Talos Kubeconfig API do, and tells when they expire. Reissuing
// before they expire keeps a cluster manageable (expired talosconfig and kubeconfig certificates
// are a common pain of the Talos providers: siderolabs/terraform-provider-talos#123, #167, #172).
package clientconfigs

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/url"
	"time"

	cryptox509 "github.com/siderolabs/crypto/x509"
	"github.com/siderolabs/talos/pkg/kubeconfig"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/siderolabs/talos/pkg/machinery/role"
	"k8s.io/client-go/tools/clientcmd"
)

// CertAndKey is a base64 PEM certificate and key, as the talos provider's secrets hold them.
type CertAndKey struct{ Cert, Key string }

// Input is what the credentials are issued from.
type Input struct {
	ClusterName string
	// Endpoint is the Kubernetes API URL, https://<endpoint>:6443.
	Endpoint string
	// OSCA and KubernetesCA are the cluster's Talos API and Kubernetes CAs.
	OSCA, KubernetesCA CertAndKey
	// TalosEndpoints and TalosNodes are the talosconfig's endpoints (control planes) and nodes.
	TalosEndpoints, TalosNodes []string
	Validity                   time.Duration
	Now                        time.Time
}

// Issued are fresh credentials and when the first of their certificates expires.
type Issued struct {
	Talosconfig, Kubeconfig string
	NotAfter                time.Time
}

// Issue issues an admin client certificate for each API, valid for in.Validity from in.Now.
func Issue(in Input) (Issued, error) {
	osCA, err := pair("Talos API CA", in.OSCA)
	if err != nil {
		return Issued{}, err
	}

	k8sCA, err := pair("Kubernetes CA", in.KubernetesCA)
	if err != nil {
		return Issued{}, err
	}

	if _, err := url.Parse(in.Endpoint); err != nil || in.Endpoint == "" {
		return Issued{}, fmt.Errorf("the Kubernetes endpoint %q is not a URL", in.Endpoint)
	}

	talosconfig, err := talosconfigOf(in, osCA)
	if err != nil {
		return Issued{}, err
	}

	// Talos' own kubeconfig generation (what `talosctl kubeconfig` gets): admin, system:masters.
	var kc bytes.Buffer
	if err := kubeconfig.Generate(&kubeconfig.GenerateInput{
		ClusterName:         in.ClusterName,
		IssuingCA:           k8sCA,
		AcceptedCAs:         []*cryptox509.PEMEncodedCertificate{{Crt: k8sCA.Crt}},
		CertificateLifetime: in.Validity,
		CommonName:          "admin",
		Organization:        "system:masters",
		Endpoint:            in.Endpoint,
		Username:            "admin",
		ContextName:         "admin",
	}, &kc); err != nil {
		return Issued{}, fmt.Errorf("issuing the Kubernetes client certificate: %w", err)
	}

	notAfter, err := NotAfter(string(talosconfig), kc.String())
	if err != nil {
		return Issued{}, err
	}

	return Issued{Talosconfig: string(talosconfig), Kubeconfig: kc.String(), NotAfter: notAfter}, nil
}

// Talosconfig issues only the Talos API admin talosconfig (in's Kubernetes fields are not read):
// what a resource that calls the Talos API itself needs, e.g. before the cluster's own
// credentials exist.
func Talosconfig(in Input) (string, error) {
	osCA, err := pair("Talos API CA", in.OSCA)
	if err != nil {
		return "", err
	}

	tc, err := talosconfigOf(in, osCA)

	return string(tc), err
}

func talosconfigOf(in Input, osCA *cryptox509.PEMEncodedCertificateAndKey) ([]byte, error) {
	talosCrt, err := secrets.NewAdminCertificateAndKey(in.Now, osCA, role.MakeSet(role.Admin), in.Validity)
	if err != nil {
		return nil, fmt.Errorf("issuing the Talos API client certificate: %w", err)
	}

	tc := clientconfig.NewConfig(in.ClusterName, in.TalosEndpoints, osCA.Crt, talosCrt)
	tc.Contexts[in.ClusterName].Nodes = in.TalosNodes

	return tc.Bytes()
}

func pair(what string, ck CertAndKey) (*cryptox509.PEMEncodedCertificateAndKey, error) {
	crt, err := base64.StdEncoding.DecodeString(ck.Cert)
	if err != nil || len(crt) == 0 {
		return nil, fmt.Errorf("the %s certificate is not base64 PEM", what)
	}

	key, err := base64.StdEncoding.DecodeString(ck.Key)
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("the %s key is not base64 PEM", what)
	}

	return &cryptox509.PEMEncodedCertificateAndKey{Crt: crt, Key: key}, nil
}

// NotAfter is when the first of the two client certificates expires.
func NotAfter(talosconfig, kubecfg string) (time.Time, error) {
	tc, err := clientconfig.FromString(talosconfig)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the talosconfig: %w", err)
	}

	ctx := tc.Contexts[tc.Context]
	if ctx == nil {
		return time.Time{}, fmt.Errorf("the talosconfig has no context %q", tc.Context)
	}

	talosCrt, err := base64.StdEncoding.DecodeString(ctx.Crt)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the talosconfig's certificate: %w", err)
	}

	kc, err := clientcmd.Load([]byte(kubecfg))
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the kubeconfig: %w", err)
	}

	var first time.Time

	certs := [][]byte{talosCrt}
	for _, u := range kc.AuthInfos {
		certs = append(certs, u.ClientCertificateData)
	}

	for _, c := range certs {
		block, _ := pem.Decode(c)
		if block == nil {
			return time.Time{}, fmt.Errorf("a client certificate is not PEM")
		}

		crt, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, err
		}

		if first.IsZero() || crt.NotAfter.Before(first) {
			first = crt.NotAfter
		}
	}

	return first, nil
}

// AdminCertificate issues a Talos API admin client certificate from the Talos API CA, valid for
// validity from now, as base64 PEM (the form of the talos provider's client configuration).
func AdminCertificate(osCA CertAndKey, now time.Time, validity time.Duration) (CertAndKey, error) {
	ca, err := pair("Talos API CA", osCA)
	if err != nil {
		return CertAndKey{}, err
	}

	crt, err := secrets.NewAdminCertificateAndKey(now, ca, role.MakeSet(role.Admin), validity)
	if err != nil {
		return CertAndKey{}, fmt.Errorf("issuing the Talos API client certificate: %w", err)
	}

	return CertAndKey{Cert: base64.StdEncoding.EncodeToString(crt.Crt), Key: base64.StdEncoding.EncodeToString(crt.Key)}, nil
}
