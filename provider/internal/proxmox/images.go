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

// knownPlatforms and knownArches are the Image Factory's platform and architecture names a file
// name may carry: an image naming another one than the cluster's is not its image.
var (
	knownPlatforms = []string{
		"metal", "nocloud", "openstack", "aws", "gcp", "azure", "vmware", "digital-ocean", "hcloud", "oracle", "scaleway",
		"upcloud", "vultr", "exoscale", "equinixMetal", "akamai", "cloudstack", "nutanix", "opennebula",
	}
	knownArches = []string{"amd64", "arm64"}
)

// MatchImage picks among the volumes of download d's datastore the Talos image of the cluster's
// schematic, version, platform and architecture that another tool put there, the way the
// Terraform modules name them ("<cluster>-<schematic id>-<version>-<platform>-<arch>.img", raw in
// iso content, or a qcow2 in import content): a disk image whose file name holds the schematic
// id (its first 16 characters at least), the Talos version as a whole word, and no other
// platform or architecture than the cluster's. An image in the content type the component
// downloads to is preferred; then the first by name. None when the component's own file
// (d.FileName) is there: that one is the stack's.
func MatchImage(c *spec.Cluster, d plan.Download, vols []pveclient.Volume) (plan.Existing, bool) {
	version := regexp.MustCompile(`(^|[^0-9A-Za-z.])v?` + regexp.QuoteMeta(strings.TrimPrefix(c.TalosVersion, "v")) +
		`($|\.[a-z]|[^0-9A-Za-z.-]|-(` + strings.Join(append(slices.Clone(knownPlatforms), knownArches...), "|") + `)|-[0-9a-f]{16})`)

	var found []plan.Existing

	for _, v := range vols {
		_, file, _ := strings.Cut(v.VolID, ":")
		name := path.Base(file)

		if name == d.FileName {
			return plan.Existing{}, false
		}

		if !diskImage(v.Content, name) || !strings.Contains(name, c.Image.SchematicID[:16]) || !version.MatchString(name) ||
			namesOther(name, knownPlatforms, c.Image.Platform) || namesOther(name, knownArches, c.Image.Arch) {
			continue
		}

		found = append(found, plan.Existing{VolID: v.VolID, ISO: v.Content == string(spec.ContentISO)})
	}

	slices.SortStableFunc(found, func(a, b plan.Existing) int {
		mine := func(e plan.Existing) bool { return e.ISO == (c.Image.ContentType == spec.ContentISO) }
		if mine(a) != mine(b) {
			if mine(a) {
				return -1
			}

			return 1
		}

		return strings.Compare(a.VolID, b.VolID)
	})

	if len(found) == 0 {
		return plan.Existing{}, false
	}

	return found[0], true
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

// namesOther tells whether name holds one of names other than own, as a word ("-metal-").
func namesOther(name string, names []string, own string) bool {
	words := strings.FieldsFunc(strings.TrimSuffix(name, path.Ext(name)), func(r rune) bool {
		return r == '-' || r == '_' || r == '.'
	})

	for _, n := range names {
		if n != own && (slices.Contains(words, n) || strings.Contains(name, "-"+n+"-") || strings.Contains(name, "_"+n+"_")) {
			return true
		}
	}

	return false
}
