package chartrepo

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The lab's stand-ins for the Proxmox CSI plugin's and the Proxmox cloud controller manager's
// charts (sergelogvinov/proxmox-csi-plugin and sergelogvinov/proxmox-cloud-controller-manager),
// written for the lab under standin/ (see each chart's README.md): the upstream charts' names,
// versions and appVersions, the values the component sets, and the same kinds and names of
// objects as upstream renders for them. They stand in for oci://ghcr.io/sergelogvinov/charts.
const (
	ProxmoxCSIChart      = "proxmox-csi-plugin"
	ProxmoxCSIVersion    = "0.5.9"
	ProxmoxCSIAppVersion = "v0.19.1"

	ProxmoxCCMChart      = "proxmox-cloud-controller-manager"
	ProxmoxCCMVersion    = "0.2.28"
	ProxmoxCCMAppVersion = "v0.13.1"
)

// "all:" keeps templates/_helpers.tpl, which go:embed skips otherwise.
//
//go:embed all:standin/proxmox-csi-plugin all:standin/proxmox-cloud-controller-manager
var proxmoxCharts embed.FS

// ProxmoxCSIArchive packages the Proxmox CSI plugin chart (ProxmoxCSIVersion) into dest and
// returns the .tgz path.
func ProxmoxCSIArchive(dest string) (string, error) { return embeddedArchive(ProxmoxCSIChart, dest) }

// ProxmoxCCMArchive packages the Proxmox cloud controller manager chart (ProxmoxCCMVersion) into
// dest and returns the .tgz path.
func ProxmoxCCMArchive(dest string) (string, error) { return embeddedArchive(ProxmoxCCMChart, dest) }

// ProxmoxArchives packages both Proxmox charts into dest: the CSI plugin's, then the CCM's.
func ProxmoxArchives(dest string) ([]string, error) {
	csi, err := ProxmoxCSIArchive(dest)
	if err != nil {
		return nil, err
	}

	ccm, err := ProxmoxCCMArchive(dest)
	if err != nil {
		return nil, err
	}

	return []string{csi, ccm}, nil
}

// embeddedArchive writes the embedded chart name to a directory under dest and packages it
// there, as `helm package` does (its .helmignore applies).
func embeddedArchive(name, dest string) (string, error) {
	root := "standin/" + name

	dir, err := os.MkdirTemp(dest, name+"-src-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	chartDir := filepath.Join(dir, name)

	err = fs.WalkDir(proxmoxCharts, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}

		rel, _ := filepath.Rel(root, p)
		target := filepath.Join(chartDir, rel)

		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}

		data, err := proxmoxCharts.ReadFile(p)
		if err != nil {
			return err
		}

		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("chart %s: %w", name, err)
	}

	return Package(chartDir, dest)
}
