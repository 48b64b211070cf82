package proxmox

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// ImagesOnHosts finds, for a cluster being adopted, the Talos images the tool that made it left on
// its hosts: for each download of the plan, a file of the host's image datastore that is the
// image the component would download (MatchImage). The VMs the component creates later (a node
// added, a replacement) are made from it, and nothing is downloaded. By download key.
//
// A host where the component's own download is already present keeps it (it is in the stack and
// stays managed), and a host without a matching file gets the component's download.
func ImagesOnHosts(ctx *pulumi.Context, opts []pulumi.ResourceOption, c *spec.Cluster, p *plan.Plan) (map[string]plan.Existing, error) {
	api, err := pveclient.New(proxmoxCredentials(ctx, opts))
	if err != nil {
		return nil, fmt.Errorf("the Talos images on the hosts of the cluster to adopt are listed through the Proxmox API, which "+
			"the component cannot reach with the proxmoxve provider's credentials: %w; check proxmoxve:endpoint and proxmoxve:apiToken", err)
	}

	out := map[string]plan.Existing{}

	for _, d := range p.Downloads {
		vols, err := api.Content(ctx.Context(), d.HostNode, d.DatastoreID)
		if err != nil {
			return nil, fmt.Errorf("image.datastoreId: listing the files of datastore %s on %s, to reuse a Talos image already "+
				"there: %w", d.DatastoreID, d.HostNode, err)
		}

		if e, ok := MatchImage(c, d, vols); ok {
			out[d.Key] = e
		}
	}

	return out, nil
}

// knownPlatforms and knownArches are the Image Factory's platform and architecture names (and
// the architectures' other names) a file name may carry: an image naming another one than the
// cluster's is not its image, nor is a Secure Boot image (UEFI only).
var (
	knownPlatforms = []string{
		"metal", "nocloud", "openstack", "aws", "gcp", "azure", "vmware", "digital-ocean", "hcloud", "oracle", "scaleway",
		"upcloud", "vultr", "exoscale", "equinixMetal", "akamai", "cloudstack", "nutanix", "opennebula",
	}
	knownArches = map[string][]string{"amd64": {"amd64", "x86_64", "x86-64"}, "arm64": {"arm64", "aarch64"}}
)

// MatchImage picks among the volumes of download d's datastore the Talos image of the cluster's
// schematic, version, platform and architecture that another tool put there, the way the
// Terraform modules name them ("<cluster>-<schematic id>-<version>-<platform>-<arch>.img" or
// ".qcow2"): a disk image in the content type the cluster downloads to (an image of the other
// type would be imported another way: a raw image in iso content over SSH), whose file name holds
// the schematic id (its first 16 characters at least), the Talos version as a whole word, the
// cluster's platform and architecture and no other, and no "secureboot". A file named as the
// component names its own downloads is another stack's (or this one's, of another content type):
// never taken. A name holding the cluster's name is preferred; then the first by name. None when
// the component's own file (d.FileName) is there: that one is the stack's.
func MatchImage(c *spec.Cluster, d plan.Download, vols []pveclient.Volume) (plan.Existing, bool) {
	sch := d.SchematicID[:16]
	version := regexp.MustCompile(`(^|[^0-9A-Za-z.])v?` + regexp.QuoteMeta(strings.TrimPrefix(c.TalosVersion, "v")) + `($|[^0-9A-Za-z.-]|\.[a-z]|-[0-9a-z])`)
	prerelease := regexp.MustCompile(regexp.QuoteMeta(strings.TrimPrefix(c.TalosVersion, "v")) + `-(alpha|beta|rc)`)
	components := regexp.MustCompile(`-talos-v[0-9]+\.[0-9]+\.[0-9]+-[0-9a-f]{16}-[A-Za-z-]+-(amd64|arm64)\.(qcow2|img)$`)

	var found []string

	for _, v := range vols {
		_, file, _ := strings.Cut(v.VolID, ":")
		name := path.Base(file)

		if name == d.FileName {
			return plan.Existing{}, false
		}

		words := "-" + strings.ReplaceAll(strings.TrimSuffix(name, path.Ext(name)), "_", "-") + "-"
		has := func(w string) bool { return strings.Contains(words, "-"+w+"-") }

		switch {
		case v.Content != string(c.Image.ContentType) || !diskImage(v.Content, name), components.MatchString(name),
			!strings.Contains(name, sch), !version.MatchString(name), prerelease.MatchString(name), has("secureboot"),
			!has(c.Image.Platform), slices.ContainsFunc(knownPlatforms, func(p string) bool { return p != c.Image.Platform && has(p) }),
			!slices.ContainsFunc(knownArches[c.Image.Arch], has),
			slices.ContainsFunc(otherArches(c.Image.Arch), has):
			continue
		}

		found = append(found, v.VolID)
	}

	if len(found) == 0 {
		return plan.Existing{}, false
	}

	slices.SortStableFunc(found, func(a, b string) int {
		if ca, cb := strings.Contains(a, c.Name), strings.Contains(b, c.Name); ca != cb {
			if ca {
				return -1
			}

			return 1
		}

		return strings.Compare(a, b)
	})

	return plan.Existing{VolID: found[0], ISO: c.Image.ContentType == spec.ContentISO}, true
}

// otherArches are the names of every architecture but arch.
func otherArches(arch string) []string {
	var out []string

	for a, names := range knownArches {
		if a != arch {
			out = append(out, names...)
		}
	}

	return out
}

// diskImage tells whether a file of content type content is a disk a VM can be made from: a raw
// image in iso content (".img"; an ".iso" is boot media, not a disk), or an image to import.
func diskImage(content, name string) bool {
	ext := path.Ext(name)

	switch content {
	case string(spec.ContentISO):
		return ext == ".img"
	case string(spec.ContentImport):
		return ext == ".qcow2" || ext == ".raw" || ext == ".img"
	}

	return false
}
