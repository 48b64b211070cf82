package proxmox

import (
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// TestMatchImage: the Talos image another tool left on a host is found by its schematic id,
// version, platform and architecture in the file name, as the Terraform modules name it (raw
// .img in iso content, or a qcow2 to import), in the content type the cluster downloads to only;
// another version, a prerelease, another or no platform, another architecture, a Secure Boot
// image, boot media, VM disks and another component stack's download are not it; a name with the
// cluster's is preferred; and the component's own download, when there, is kept instead.
func TestMatchImage(t *testing.T) {
	t.Parallel()

	const id = "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515"

	cluster := func(content spec.ContentType) (*spec.Cluster, plan.Download) {
		c := &spec.Cluster{Name: "home", TalosVersion: "v1.11.5", Image: spec.Image{
			SchematicID: id, Platform: "nocloud", Arch: "amd64", ContentType: content,
		}, Nodes: []spec.Node{{Name: "cp-1", HostNode: "pve1"}}}

		return c, plan.Build(c).Downloads[0]
	}

	vol := func(content, file string) pveclient.Volume {
		return pveclient.Volume{VolID: "local:" + content + "/" + file, Content: content}
	}

	seed := "talos-" + id + "-v1.11.5-nocloud-amd64.img"

	cases := []struct {
		name    string
		content spec.ContentType
		vols    []pveclient.Volume
		want    plan.Existing
	}{
		{"the seed module's raw image in iso content", spec.ContentISO, []pveclient.Volume{vol("iso", seed)},
			plan.Existing{VolID: "local:iso/" + seed, ISO: true}},
		{"a qcow2 to import, version before the schematic, x86_64", spec.ContentImport, []pveclient.Volume{vol("import", "k8s_v1.11.5_"+id[:16]+"_nocloud_x86_64.qcow2")},
			plan.Existing{VolID: "local:import/k8s_v1.11.5_" + id[:16] + "_nocloud_x86_64.qcow2"}},
		{"an image of the other content type (imported over SSH)", spec.ContentImport, []pveclient.Volume{vol("iso", seed)}, plan.Existing{}},
		{"the cluster's name is preferred", spec.ContentImport, []pveclient.Volume{
			vol("import", "a-"+id+"-v1.11.5-nocloud-amd64.qcow2"), vol("import", "home-"+id+"-v1.11.5-nocloud-amd64.qcow2"),
		}, plan.Existing{VolID: "local:import/home-" + id + "-v1.11.5-nocloud-amd64.qcow2"}},
		{"another version", spec.ContentISO, []pveclient.Volume{
			vol("iso", "talos-"+id+"-v1.11.6-nocloud-amd64.img"), vol("iso", "talos-"+id+"-v1.11.50-nocloud-amd64.img"),
			vol("iso", "talos-"+id+"-v11.11.5-nocloud-amd64.img"),
		}, plan.Existing{}},
		{"a prerelease", spec.ContentISO, []pveclient.Volume{vol("iso", "talos-"+id+"-v1.11.5-beta.1-nocloud-amd64.img")}, plan.Existing{}},
		{"another or no platform", spec.ContentISO, []pveclient.Volume{
			vol("iso", "talos-"+id+"-v1.11.5-metal-amd64.img"), vol("iso", "talos-"+id+"-v1.11.5-amd64.img"),
			vol("iso", "talos-"+id+"-v1.11.5-nocloud-amd64-digital-ocean.img"),
		}, plan.Existing{}},
		{"another architecture", spec.ContentISO, []pveclient.Volume{
			vol("iso", "talos-"+id+"-v1.11.5-nocloud-arm64.img"), vol("iso", "talos-"+id+"-v1.11.5-nocloud-aarch64.img"),
			vol("iso", "talos-"+id+"-v1.11.5-nocloud.img"),
		}, plan.Existing{}},
		{"a Secure Boot image", spec.ContentISO, []pveclient.Volume{vol("iso", "talos-"+id+"-v1.11.5-nocloud-amd64-secureboot.img")}, plan.Existing{}},
		{"another schematic", spec.ContentISO, []pveclient.Volume{vol("iso", "talos-"+id[1:]+"0-v1.11.5-nocloud-amd64.img")}, plan.Existing{}},
		{"boot media and VM disks", spec.ContentISO, []pveclient.Volume{
			vol("iso", "talos-"+id+"-v1.11.5-nocloud-amd64.iso"), vol("images", "vm-100-disk-0-"+id+"-v1.11.5-nocloud-amd64.raw"),
		}, plan.Existing{}},
		{"another component stack's download", spec.ContentImport, []pveclient.Volume{
			vol("import", "prod-talos-v1.11.5-"+id[:16]+"-nocloud-amd64.qcow2"),
		}, plan.Existing{}},
		{"the component's own download is there", spec.ContentImport, []pveclient.Volume{
			vol("import", "a-"+id+"-v1.11.5-nocloud-amd64.qcow2"), vol("import", "home-talos-v1.11.5-"+id[:16]+"-nocloud-amd64.qcow2"),
		}, plan.Existing{}},
	}

	for _, tc := range cases {
		c, d := cluster(tc.content)

		got, ok := MatchImage(c, d, tc.vols)
		if got != tc.want || ok != (tc.want.VolID != "") {
			t.Errorf("%s: %+v (%v), want %+v", tc.name, got, ok, tc.want)
		}
	}
}
