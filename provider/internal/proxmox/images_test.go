package proxmox

import (
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/pveclient"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// TestMatchImage: the Talos image another tool left on a host is found by its schematic id,
// version, platform and architecture in the file name, as the Terraform modules name it (raw
// .img in iso content) or as a qcow2 to import; another version, a prerelease, another platform
// or architecture, boot media and VM disks are not it; an image of the content type the cluster
// downloads to is preferred; and the component's own download, when there, is kept instead.
func TestMatchImage(t *testing.T) {
	t.Parallel()

	const id = "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515"

	c := &spec.Cluster{Name: "home", TalosVersion: "v1.11.5", Image: spec.Image{
		SchematicID: id, Platform: "nocloud", Arch: "amd64", ContentType: spec.ContentImport,
	}}
	d := plan.Build(&spec.Cluster{Name: "home", TalosVersion: "v1.11.5", Image: c.Image,
		Nodes: []spec.Node{{Name: "cp-1", HostNode: "pve1"}}}).Downloads[0]

	vol := func(content, file string) pveclient.Volume {
		return pveclient.Volume{VolID: "local:" + content + "/" + file, Content: content}
	}

	cases := []struct {
		name string
		vols []pveclient.Volume
		want plan.Existing
	}{
		{"the seed module's raw image in iso content", []pveclient.Volume{vol("iso", "talos-"+id+"-v1.11.5-nocloud-amd64.img")},
			plan.Existing{VolID: "local:iso/talos-" + id + "-v1.11.5-nocloud-amd64.img", ISO: true}},
		{"a qcow2 to import, version before the schematic", []pveclient.Volume{vol("import", "home-v1.11.5-"+id+".qcow2")},
			plan.Existing{VolID: "local:import/home-v1.11.5-" + id + ".qcow2"}},
		{"a short schematic id and no platform", []pveclient.Volume{vol("import", "talos_1.11.5_"+id[:16]+".qcow2")},
			plan.Existing{VolID: "local:import/talos_1.11.5_" + id[:16] + ".qcow2"}},
		{"the content type the cluster downloads to is preferred", []pveclient.Volume{
			vol("iso", "a-"+id+"-v1.11.5-nocloud-amd64.img"), vol("import", "z-"+id+"-v1.11.5-nocloud-amd64.qcow2"),
		}, plan.Existing{VolID: "local:import/z-" + id + "-v1.11.5-nocloud-amd64.qcow2"}},
		{"another version", []pveclient.Volume{
			vol("iso", "talos-"+id+"-v1.11.6-nocloud-amd64.img"), vol("iso", "talos-"+id+"-v1.11.50-nocloud-amd64.img"),
			vol("iso", "talos-"+id+"-v11.11.5-nocloud-amd64.img"),
		}, plan.Existing{}},
		{"a prerelease", []pveclient.Volume{vol("iso", "talos-"+id+"-v1.11.5-beta.1-nocloud-amd64.img")}, plan.Existing{}},
		{"another platform or architecture", []pveclient.Volume{
			vol("iso", "talos-"+id+"-v1.11.5-metal-amd64.img"), vol("import", "talos-"+id+"-v1.11.5-nocloud-arm64.qcow2"),
		}, plan.Existing{}},
		{"another schematic", []pveclient.Volume{vol("iso", "talos-"+id[1:]+"0-v1.11.5-nocloud-amd64.img")}, plan.Existing{}},
		{"boot media and VM disks", []pveclient.Volume{
			vol("iso", "talos-"+id+"-v1.11.5-nocloud-amd64.iso"), vol("images", "vm-100-disk-0-"+id+"-v1.11.5.raw"),
		}, plan.Existing{}},
		{"the component's own download is there", []pveclient.Volume{
			vol("import", "a-"+id+"-v1.11.5-nocloud-amd64.qcow2"), vol("import", d.FileName),
		}, plan.Existing{}},
	}

	for _, tc := range cases {
		got, ok := MatchImage(c, d, tc.vols)
		if got != tc.want || ok != (tc.want.VolID != "") {
			t.Errorf("%s: %+v (%v), want %+v", tc.name, got, ok, tc.want)
		}
	}
}
