package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/fluxcd/flux2/v2/pkg/manifestgen/install"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// releaseURL matches the per-controller release assets flux2's manifests/bases point at.
var releaseURL = regexp.MustCompile(`https://github\.com/fluxcd/([a-z0-9-]+)/releases/download/(v[0-9][^/\s]*)/([a-z0-9-]+)\.(crds|deployment)\.yaml`)

// substitute builds a controller release the module proxy does not serve from one it serves.
type substitute struct {
	// Version is the release whose config/ is built instead, with the image tag set to the
	// wanted release.
	Version string
	// API is the controller's API module: its Go sources must be the same at both versions
	// (go.mod and go.sum aside), so the CRDs controller-gen makes from them are the same.
	API string
}

// substitutes: notification-controller v1.9.4 (pinned by flux2 v2.9.5) is refused by the proxy
// here; its api/ is the same as v1.9.3's, and the controllers' patch releases of this series
// change nothing in config/ but the image tag (source-controller and kustomize-controller
// v1.9.3→v1.9.4→v1.9.5, helm-controller v1.6.3→v1.6.4, notification-controller v1.9.2→v1.9.3).
var substitutes = map[string]substitute{
	"notification-controller@v1.9.4": {Version: "v1.9.3", API: "github.com/fluxcd/notification-controller/api"},
}

// asset is one release asset, built as the controller's release workflow builds it.
type asset struct {
	Name   string // e.g. source-controller.crds.yaml
	Data   []byte
	Source string // module@version h1:sum it was built from, and how
}

// cliOptions are the kustomize CLI's defaults for `kustomize build` (legacy resource order,
// load restricted to the root, no plugins), with which the release assets and flux2's
// manifests bundle are built.
func cliOptions() *krusty.Options {
	o := krusty.MakeDefaultOptions()
	o.Reorder = krusty.ReorderOptionUnspecified
	return o
}

func kbuild(fsys filesys.FileSystem, dir string) ([]byte, error) {
	m, err := krusty.MakeKustomizer(cliOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return m.AsYaml()
}

// copyTree copies the regular files under src into fsys at dst.
func copyTree(fsys filesys.FileSystem, src, dst string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		if err := fsys.MkdirAll(path.Dir(target)); err != nil {
			return err
		}
		return fsys.WriteFile(target, b)
	})
}

// releaseAssets builds <controller>.crds.yaml (`kustomize build config/crd`) and
// <controller>.deployment.yaml (`kustomize build config/manager`) of controller@version.
func releaseAssets(d *downloader, controller, version string) ([]asset, error) {
	modVersion := version
	how := ""
	if sub, ok := substitutes[controller+"@"+version]; ok {
		wanted, err := d.download(sub.API, version)
		if err != nil {
			return nil, err
		}
		served, err := d.download(sub.API, sub.Version)
		if err != nil {
			return nil, err
		}
		if err := sameTree(wanted.Dir, served.Dir, "go.mod", "go.sum"); err != nil {
			return nil, fmt.Errorf("%s@%s cannot stand in for %s: %w", controller, sub.Version, version, err)
		}
		modVersion = sub.Version
		how = fmt.Sprintf(", image tag set to %s (%s@%s %s has the same Go sources as @%s)", version, sub.API, version, wanted.Sum, sub.Version)
	}
	m, err := d.download("github.com/fluxcd/"+controller, modVersion)
	if err != nil {
		return nil, err
	}
	fsys := filesys.MakeFsInMemory()
	for _, sub := range []string{"config/crd", "config/manager"} {
		if err := copyTree(fsys, filepath.Join(m.Dir, sub), "/src/"+sub); err != nil {
			return nil, err
		}
	}
	if modVersion != version {
		k := "/src/config/manager/kustomization.yaml"
		b, err := fsys.ReadFile(k)
		if err != nil {
			return nil, err
		}
		from, to := "newTag: "+modVersion+"\n", "newTag: "+version+"\n"
		if n := strings.Count(string(b), from); n != 1 {
			return nil, fmt.Errorf("%s@%s %s: %d lines %q, want 1", controller, modVersion, k, n, strings.TrimSpace(from))
		}
		if err := fsys.WriteFile(k, []byte(strings.Replace(string(b), from, to, 1))); err != nil {
			return nil, err
		}
	}
	source := fmt.Sprintf("%s@%s %s%s", m.Path, m.Version, m.Sum, how)
	crds, err := kbuild(fsys, "/src/config/crd")
	if err != nil {
		return nil, err
	}
	deployment, err := kbuild(fsys, "/src/config/manager")
	if err != nil {
		return nil, err
	}
	if image := "image: fluxcd/" + controller + ":" + version + "\n"; !strings.Contains(string(deployment), image) {
		return nil, fmt.Errorf("%s.deployment.yaml has no %q", controller, strings.TrimSpace(image))
	}
	return []asset{
		{Name: controller + ".crds.yaml", Data: crds, Source: source},
		{Name: controller + ".deployment.yaml", Data: deployment, Source: source},
	}, nil
}

// bundle builds what flux2's manifests/scripts/bundle.sh puts in the CLI (and in the release's
// manifests.tar.gz) for the given components: <component>.yaml, rbac.yaml and policies.yaml,
// with the release URLs of manifests/bases replaced by locally built assets.
func bundle(d *downloader, fluxDir string, components []string) (map[string][]byte, []asset, error) {
	fsys := filesys.MakeFsInMemory()
	var assets []asset
	built := map[string]bool{}
	for _, c := range components {
		base := "/flux/manifests/bases/" + c
		if err := copyTree(fsys, filepath.Join(fluxDir, "manifests", "bases", c), base); err != nil {
			return nil, nil, err
		}
		k := base + "/kustomization.yaml"
		b, err := fsys.ReadFile(k)
		if err != nil {
			return nil, nil, err
		}
		var rewriteErr error
		text := releaseURL.ReplaceAllStringFunc(string(b), func(u string) string {
			s := releaseURL.FindStringSubmatch(u)
			controller, version, name := s[1], s[2], s[3]+"."+s[4]+".yaml"
			if s[3] != controller {
				rewriteErr = fmt.Errorf("%s: asset %s of another controller", k, u)
				return u
			}
			if !built[controller+"@"+version] {
				as, err := releaseAssets(d, controller, version)
				if err != nil {
					rewriteErr = err
					return u
				}
				built[controller+"@"+version] = true
				assets = append(assets, as...)
			}
			i := slices.IndexFunc(assets, func(a asset) bool { return a.Name == name })
			if err := fsys.WriteFile(base+"/"+name, assets[i].Data); err != nil {
				rewriteErr = err
			}
			return name
		})
		if rewriteErr != nil {
			return nil, nil, rewriteErr
		}
		if strings.Contains(text, "://") {
			return nil, nil, fmt.Errorf("%s: a remote resource is left: %s", k, text)
		}
		if err := fsys.WriteFile(k, []byte(text)); err != nil {
			return nil, nil, err
		}
	}
	for _, dir := range []string{"rbac", "policies"} {
		if err := copyTree(fsys, filepath.Join(fluxDir, "manifests", dir), "/flux/manifests/"+dir); err != nil {
			return nil, nil, err
		}
	}
	out := map[string][]byte{}
	for _, c := range components {
		y, err := kbuild(fsys, "/flux/manifests/bases/"+c)
		if err != nil {
			return nil, nil, err
		}
		out[c+".yaml"] = y
	}
	for _, dir := range []string{"rbac", "policies"} {
		y, err := kbuild(fsys, "/flux/manifests/"+dir)
		if err != nil {
			return nil, nil, err
		}
		out[dir+".yaml"] = y
	}
	return out, assets, nil
}

// installManifests runs flux2's own install.Generate, as `flux install --export` does with
// its embedded manifests, on the bundle: the default options of `flux install` at version.
func installManifests(files map[string][]byte, version string) (string, install.Options, error) {
	dir, err := os.MkdirTemp("", "fluxgen-install-")
	if err != nil {
		return "", install.Options{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return "", install.Options{}, err
		}
	}
	opts := install.MakeDefaultOptions()
	opts.Version = version
	opts.ManifestFile = opts.Namespace + ".yaml"
	m, err := install.Generate(opts, dir)
	if err != nil {
		return "", install.Options{}, err
	}
	return m.Content, opts, nil
}
