package spec

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"go.yaml.in/yaml/v4"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/helmrender"
)

func checkPatches(p *problems, path string, patches []Patch) {
	for i, patch := range patches {
		if !patch.Known {
			continue
		}

		at := fmt.Sprintf("%s[%d]", path, i)
		if strings.TrimSpace(patch.Text) == "" {
			p.errorf(at, "is empty; remove it or write a Talos machine configuration patch")
			continue
		}

		if _, err := configpatcher.LoadPatch([]byte(patch.Text)); err != nil {
			p.errorf(at, "is not a Talos machine configuration patch: %v; write YAML such as \"machine:\\n  sysctls:\\n    vm.max_map_count: \\\"262144\\\"\" or a JSON patch list", oneLine(err.Error()))
		}
	}
}

func buildManifests(p *problems, in Input, c *Cluster) {
	seen := map[string]bool{}

	for i, m := range in.InlineManifests {
		path := fmt.Sprintf("inlineManifests[%d]", i)
		switch {
		case m.Name == "":
			p.errorf(path+".name", "is required; Talos tracks each inline manifest by its name")
		case !manifestNameRe.MatchString(m.Name):
			p.errorf(path+".name", "%q is not a valid manifest name; use letters, digits, '-', '_' and '.'", m.Name)
		case strings.HasPrefix(m.Name, helmrender.ManifestPrefix):
			p.errorf(path+".name", "%q starts with %q, which is reserved for Helm releases the component renders; rename it", m.Name, helmrender.ManifestPrefix)
		case slices.Contains(ReservedManifestNames, m.Name):
			p.errorf(path+".name", "%q is the name of a manifest the component makes itself (the etcd backup CronJob, the nvidia "+
				"RuntimeClass); rename it", m.Name)
		case seen[m.Name]:
			p.errorf(path+".name", "%q is used twice; give each inline manifest its own name", m.Name)
		}
		seen[m.Name] = true

		if m.Contents.Known {
			if why := checkManifestYAML(m.Contents.Text); why != "" {
				p.errorf(path+".contents", "%s", why)
			}
		}

		c.InlineManifests = append(c.InlineManifests, InlineManifest(m))
	}

	for i, u := range in.ExtraManifests {
		if !isHTTPURL(u) {
			p.errorf(fmt.Sprintf("extraManifests[%d]", i), "%q is not an http(s) URL; Talos downloads extra manifests from URLs such as https://example.com/manifest.yaml", u)
		}
	}

	c.ExtraManifests = slices.Clone(in.ExtraManifests)

	for _, u := range slices.Sorted(maps.Keys(in.ExtraManifestNamespaces)) {
		ns, path := in.ExtraManifestNamespaces[u], fmt.Sprintf("extraManifestNamespaces[%q]", u)

		switch {
		case !slices.Contains(in.ExtraManifests, u):
			p.errorf(path, "%q is not one of extraManifests; list the URL in extraManifests too, or remove this entry", u)
		case len(validation.IsDNS1123Label(ns)) > 0:
			p.errorf(path, "%q is not a namespace name; use lower-case letters, digits and '-' (at most 63), such as \"argocd\"", ns)
		case in.ManifestSync.Enabled != nil && !*in.ManifestSync.Enabled:
			p.errorf(path, "needs the manifest sync, which applies such manifests after bootstrap (Talos cannot set their namespace); set manifestSync.enabled to true or remove this entry")
		}
	}

	if len(in.ExtraManifestNamespaces) > 0 {
		c.ExtraManifestNamespaces = maps.Clone(in.ExtraManifestNamespaces)
	}
}

// TalosExtraManifests are the extra manifest URLs Talos downloads and applies itself: those
// without a namespace of their own (ExtraManifestNamespaces).
func (c *Cluster) TalosExtraManifests() []string {
	return slices.DeleteFunc(slices.Clone(c.ExtraManifests), func(u string) bool {
		_, ok := c.ExtraManifestNamespaces[u]
		return ok
	})
}

// checkManifestYAML returns why a Kubernetes manifest stream is unusable, or "".
func checkManifestYAML(text string) string {
	dec := yaml.NewDecoder(strings.NewReader(text))
	docs := 0

	for {
		var doc map[string]any

		err := dec.Decode(&doc)
		if err != nil {
			if err.Error() == "EOF" {
				break
			}

			// Where, never what: YAML's message quotes the text, and manifests may be secrets.
			return "is not valid YAML" + yamlLine(err)
		}

		if doc == nil {
			continue
		}

		docs++

		if _, ok := doc["apiVersion"].(string); !ok {
			return fmt.Sprintf("document %d has no apiVersion; every Kubernetes object needs apiVersion and kind", docs)
		}

		if _, ok := doc["kind"].(string); !ok {
			return fmt.Sprintf("document %d has no kind; every Kubernetes object needs apiVersion and kind", docs)
		}
	}

	if docs == 0 {
		return "holds no Kubernetes object; write at least one YAML document with apiVersion and kind"
	}

	return ""
}

var yamlLineRe = regexp.MustCompile(`line (\d+)`)

// yamlLine is " (line N)" for a YAML error that names its line, else "".
func yamlLine(err error) string {
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		return " (line " + m[1] + ")"
	}

	return ""
}

// ReservedManifestNames are the inline manifests the component makes itself: the etcd backup
// CronJob (etcdBackup.schedule) and the nvidia RuntimeClass (nodes.<n>.gpu).
var ReservedManifestNames = []string{"talos-proxmox-etcd-backup", "nvidia-runtimeclass"}
