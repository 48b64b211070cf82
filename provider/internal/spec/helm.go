package spec

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
)

// Cilium defaults: the chart the `cilium` input installs when it names no version or repository.
const (
	DefaultCiliumVersion    = "1.18.0"
	DefaultCiliumRepository = "https://helm.cilium.io"
)

// ChartPresetInput is a chart the component presets (cilium, nvidiaDevicePlugin): its source and
// the values merged over the preset's.
type ChartPresetInput struct {
	Version    string
	Repository string
	Digest     string
	Values     map[string]any
	ValuesYAML string
}

// HelmChartInput is a Helm chart rendered into the control planes' inline manifests.
type HelmChartInput struct {
	Name        string
	Chart       string
	Repository  string
	Version     string
	Namespace   string
	Digest      string
	Values      map[string]any
	ValuesYAML  string
	IncludeCRDs *bool
}

var semverRe = regexp.MustCompile(`^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// CiliumHint tells users how to make Cilium's chart render the same bytes every time.
const CiliumHint = "for Cilium keep hubble.tls.auto.method=cronJob (the component's default; certificates are then " +
	"made in the cluster), or set hubble.enabled=false"

// CiliumPreset is the Talos values for Cilium (docs.siderolabs.com, "Deploying Cilium CNI",
// without kube-proxy): IPAM from Kubernetes, kube-proxy replacement through KubePrism on
// localhost:7445, Talos' cgroup mount, the capability lists Talos allows (no SYS_MODULE), Hubble
// certificates made in the cluster by a CronJob (deterministic renders), and no more operator
// replicas than control planes.
func CiliumPreset(controlPlanes int) map[string]any {
	replicas := min(2, max(1, controlPlanes))

	return map[string]any{
		"ipam":                 map[string]any{"mode": "kubernetes"},
		"kubeProxyReplacement": true,
		"k8sServiceHost":       "localhost",
		"k8sServicePort":       float64(7445),
		"cgroup": map[string]any{
			"autoMount": map[string]any{"enabled": false},
			"hostRoot":  "/sys/fs/cgroup",
		},
		"securityContext": map[string]any{"capabilities": map[string]any{
			"ciliumAgent": []any{"CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_ADMIN",
				"SYS_RESOURCE", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"},
			"cleanCiliumState": []any{"NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"},
		}},
		"hubble":   map[string]any{"tls": map[string]any{"auto": map[string]any{"method": "cronJob"}}},
		"operator": map[string]any{"replicas": float64(replicas)},
	}
}

func buildHelm(p *problems, in Input, c *Cluster) {
	names := map[string]string{}

	if ci := in.Cilium; ci != nil {
		preset := CiliumPreset(len(c.ControlPlanes()))
		// Cilium routes IPv4 only unless told: a dual-stack cluster's pods need IPv6 too, an
		// IPv6-only cluster's no IPv4.
		if c.Network.IPv6 {
			preset["ipv6"] = map[string]any{"enabled": true}
		}

		if !c.Network.IPv4 {
			preset["ipv4"] = map[string]any{"enabled": false}
		}

		r := presetRelease(p, "cilium", ci, helmrender.Source{Chart: "cilium", Repository: DefaultCiliumRepository, Version: DefaultCiliumVersion},
			preset)
		r.Hint = CiliumHint

		// The component turns kube-proxy off for Cilium; Cilium must then replace it.
		switch v := r.Values["kubeProxyReplacement"]; v {
		case true, "true":
		default:
			p.errorf("cilium.values.kubeProxyReplacement", "is %v, but with cilium the component disables "+
				"kube-proxy, so the cluster would have no service proxy; leave it at true (the default)", v)
		}

		c.Cilium = true
		c.HelmReleases = append(c.HelmReleases, r)
		names["cilium"] = "cilium"
	}

	buildNvidiaDevicePlugin(p, in, c, names)
	buildProxmoxCloud(p, in, c, names)

	for i, h := range in.HelmCharts {
		path := fmt.Sprintf("helmCharts[%d]", i)

		r := helmrender.Release{
			Path: path, Name: h.Name, Namespace: h.Namespace, IncludeCRDs: h.IncludeCRDs == nil || *h.IncludeCRDs,
			Source: helmrender.Source{Chart: h.Chart, Repository: h.Repository, Version: h.Version},
		}

		switch {
		case h.Name == "":
			p.errorf(path+".name", "is required: the Helm release name, e.g. \"metrics-server\"")
		case len(h.Name) > 53 || !isDNSLabel(h.Name):
			p.errorf(path+".name", "%q is not a valid Helm release name; use at most 53 lower-case letters, digits and '-'", h.Name)
		case names[h.Name] != "":
			p.errorf(path+".name", "%q is already used by %s; release names must be unique", h.Name, names[h.Name])
		default:
			names[h.Name] = path
		}

		if r.Namespace == "" {
			r.Namespace = "default"
		} else if !isDNSLabel(r.Namespace) {
			p.errorf(path+".namespace", "%q is not a Kubernetes namespace name (a DNS label)", r.Namespace)
		}

		if h.Chart == "" {
			p.errorf(path+".chart", "is required: the chart's name in repository, or a local chart directory or .tgz when repository is empty")
		}

		checkRepository(p, path+".repository", h.Repository, true)

		if h.Repository != "" {
			checkChartVersion(p, path+".version", h.Version, true)
		} else if h.Version != "" {
			checkChartVersion(p, path+".version", h.Version, false)
		}

		r.Source.Digest = checkDigest(p, path+".digest", h.Digest)
		r.Values = userValues(p, path, h.ValuesYAML, h.Values)

		c.HelmReleases = append(c.HelmReleases, r)
	}
}

// presetRelease is the release of a chart the component presets, at path (its input, in): in
// kube-system, CRDs included, from the source given (in's repository and version over def's),
// with in's values merged over preset.
func presetRelease(p *problems, path string, in *ChartPresetInput, def helmrender.Source, preset map[string]any) helmrender.Release {
	r := helmrender.Release{
		Path: path, Name: def.Chart, Namespace: "kube-system", IncludeCRDs: true,
		Source: helmrender.Source{Chart: def.Chart, Repository: firstString(in.Repository, def.Repository), Version: firstString(in.Version, def.Version)},
	}

	checkRepository(p, path+".repository", r.Source.Repository, false)
	checkChartVersion(p, path+".version", r.Source.Version, true)
	r.Source.Digest = checkDigest(p, path+".digest", in.Digest)
	r.Values = mergeValues(preset, userValues(p, path, in.ValuesYAML, in.Values))

	return r
}

func checkRepository(p *problems, path, repo string, localAllowed bool) {
	switch {
	case repo == "" && localAllowed:
	case strings.HasPrefix(repo, "oci://"):
		if rest := strings.TrimPrefix(repo, "oci://"); rest == "" || strings.Contains(rest, "://") {
			p.errorf(path, "%q is not an OCI registry path; use oci://<registry host>/<path>, e.g. oci://ghcr.io/org/charts", repo)
		}
	case isHTTPURL(repo):
	default:
		p.errorf(path, "%q is not a chart repository; use an https:// repository URL (with an index.yaml) or oci://<registry>/<path>", repo)
	}
}

func checkChartVersion(p *problems, path, v string, required bool) {
	switch {
	case v == "" && required:
		p.errorf(path, "is required for a chart from a repository: pin an exact version (e.g. \"1.2.3\") so every render uses the same chart")
	case v != "" && !semverRe.MatchString(v):
		p.errorf(path, "%q is not an exact chart version; use a semantic version such as \"1.18.0\" (ranges would change the rendered manifests over time)", v)
	}
}

func checkDigest(p *problems, path, d string) string {
	if d == "" {
		return ""
	}

	norm := strings.ToLower(d)
	if !strings.HasPrefix(norm, "sha256:") {
		norm = "sha256:" + norm
	}

	if !helmrender.ValidDigest(norm) {
		p.errorf(path, "%q is not a sha256 digest; use sha256:<64 hex digits> (`sha256sum <chart>.tgz`)", d)
		return ""
	}

	return norm
}

// userValues merges valuesYaml and then values (values win).
func userValues(p *problems, path, text string, values map[string]any) map[string]any {
	out := map[string]any{}

	if strings.TrimSpace(text) != "" {
		var v any
		if err := yaml.Unmarshal([]byte(text), &v); err != nil {
			p.errorf(path+".valuesYaml", "is not valid YAML: %v", err)
		} else if m, ok := v.(map[string]any); ok {
			out = m
		} else if v != nil {
			p.errorf(path+".valuesYaml", "must be a YAML mapping of chart values (key: value), not a %T", v)
		}
	}

	return mergeValues(out, values)
}

// mergeValues returns base with over deep-merged on top: maps merge key by key, anything else
// replaces; a null is kept, so Helm drops the chart's default for that key.
func mergeValues(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}

	for _, k := range slices.Sorted(maps.Keys(over)) {
		v := over[k]
		if v == nil {
			out[k] = nil // Helm then drops the chart's default too
			continue
		}

		bm, bok := out[k].(map[string]any)
		om, ook := v.(map[string]any)

		if bok && ook {
			out[k] = mergeValues(bm, om)
		} else {
			out[k] = v
		}
	}

	return out
}
