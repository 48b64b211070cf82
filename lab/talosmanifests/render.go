// Package talosmanifests applies a Talos cluster's manifests the way Talos v1.13 does
// (internal/app/machined/pkg/controllers/k8s/manifest_apply.go, MPL-2.0, ported in part): Talos'
// own bootstrap manifests (CoreDNS, kube-proxy, the default Flannel CNI), then
// cluster.inlineManifests and cluster.extraManifests, created once: an object that exists (or
// that Talos already created, per its inventory ConfigMap) is never updated or deleted again.
// That is why day-2 changes to inline manifests need a manifest sync of their own.
//
// The bootstrap manifests are trimmed versions of Talos' templates: the same kinds, names,
// namespaces, labels, selectors, images, host networking, tolerations and (for Flannel) the
// /etc/cni/net.d hostPath that makes a node's network ready; no RBAC beyond service accounts, no
// probes, no resource requests.
package talosmanifests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/template"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
)

// Source is one named manifest: what Talos calls a manifest resource.
type Source struct {
	Name      string
	Documents []*unstructured.Unstructured
}

// Manifests are the manifests a control plane with cfg applies, in Talos' order.
func Manifests(ctx context.Context, cfg config.Config) ([]Source, error) {
	var out []Source

	add := func(name, text string) error {
		docs, err := Parse(text)
		if err != nil {
			return fmt.Errorf("manifest %s: %w", name, err)
		}

		out = append(out, Source{Name: name, Documents: docs})

		return nil
	}

	facts := FactsOf(cfg)
	data := templateData{
		ProxyImage: facts.ProxyImage, CoreDNSImage: facts.CoreDNSImage,
		FlannelImage: "ghcr.io/siderolabs/flannel:v" + constants.FlannelVersion,
		PodCIDR:      strings.Join(facts.PodCIDRs, ","), Domain: facts.DNSDomain, DNSServiceIP: facts.DNSServiceIP,
	}

	var bootstrap []string
	if facts.CoreDNSEnabled {
		bootstrap = append(bootstrap, "11-core-dns", coreDNS)
	}

	if facts.ProxyEnabled {
		bootstrap = append(bootstrap, "10-kube-proxy", kubeProxy)
	}

	if facts.CNI == constants.FlannelCNI {
		bootstrap = append(bootstrap, "05-flannel", flannel)
	}

	for i := 0; i < len(bootstrap); i += 2 {
		var buf bytes.Buffer
		if err := template.Must(template.New(bootstrap[i]).Parse(bootstrap[i+1])).Execute(&buf, data); err != nil {
			return nil, err
		}

		if err := add(bootstrap[i], buf.String()); err != nil {
			return nil, err
		}
	}

	for _, m := range facts.External {
		text, err := fetch(ctx, m.URL, m.Headers)
		if err != nil {
			return nil, err
		}

		if err := add(m.Name, text); err != nil {
			return nil, err
		}
	}

	for _, m := range facts.Inline {
		if err := add(m.Name, m.Contents); err != nil {
			return nil, err
		}
	}

	return out, nil
}

// Parse splits a multi-document YAML (or JSON) manifest into objects, skipping empty documents.
func Parse(text string) ([]*unstructured.Unstructured, error) {
	dec := yamlutil.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)

	var out []*unstructured.Unstructured

	for {
		obj := map[string]any{}
		if err := dec.Decode(&obj); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}

		if len(obj) == 0 {
			continue
		}

		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("a document without apiVersion or kind")
		}

		out = append(out, u)
	}
}

func fetch(ctx context.Context, url string, headers map[string]string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("extra manifest %s: %w", url, err)
	}

	for k, v := range headers {
		req.Header.Set(k, v)
	}

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("extra manifest %s: %w", url, err)
	}
	defer resp.Body.Close() //nolint:errcheck

	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("extra manifest %s: %s", url, resp.Status)
	}

	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))

	return string(body), err
}

type templateData struct {
	ProxyImage, CoreDNSImage, FlannelImage, PodCIDR, Domain, DNSServiceIP string
}
