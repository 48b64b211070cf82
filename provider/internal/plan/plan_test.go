package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

func cluster(t *testing.T, mutate func(*spec.Input)) *spec.Cluster {
	t.Helper()

	in := spec.Input{
		ClusterName:  "homelab",
		TalosVersion: "v1.11.5",
		Network:      spec.NetworkInput{Gateway: "10.0.0.1"},
		Nodes: map[string]spec.NodeInput{
			"cp-1": {HostNode: "pve1", Role: "controlplane", IP: "10.0.0.11"},
			"cp-2": {HostNode: "pve2", Role: "controlplane", IP: "10.0.0.12"},
			"cp-3": {HostNode: "pve1", Role: "controlplane", IP: "10.0.0.13"},
			"w-1": {HostNode: "pve2", Role: "worker", IP: "10.0.0.21",
				DataDisks:  []spec.DataDiskInput{{SizeGiB: 50, MountPath: "/var/lib/longhorn"}},
				PCIDevices: []spec.PCIDeviceInput{{Mapping: "gpu"}}},
		},
	}
	if mutate != nil {
		mutate(&in)
	}

	c, err := spec.Build(in)
	if err != nil {
		t.Fatal(err)
	}

	return c
}

func TestOneDownloadPerHost(t *testing.T) {
	t.Parallel()

	p := Build(cluster(t, nil))
	if len(p.Downloads) != 2 {
		t.Fatalf("downloads = %d, want 2 (one per host)", len(p.Downloads))
	}

	if p.Downloads[0].Key != "image-pve1" || p.Downloads[1].Key != "image-pve2" {
		t.Fatalf("download keys = %s, %s", p.Downloads[0].Key, p.Downloads[1].Key)
	}

	d := p.Downloads[0]
	if d.ContentType != "import" || d.Decompression != "" || !strings.HasSuffix(d.URL, "/v1.11.5/nocloud-amd64.qcow2") {
		t.Fatalf("download = %+v", d)
	}

	if !strings.HasPrefix(d.FileName, "homelab-talos-v1.11.5-ce4c980550dd2ab1-nocloud-amd64") || !strings.HasSuffix(d.FileName, ".qcow2") {
		t.Fatalf("file name = %s", d.FileName)
	}

	for _, vm := range p.VMs {
		if p.Downloads[vm.Download].HostNode != vm.Node.HostNode {
			t.Errorf("%s on %s imports from the download on %s", vm.Node.Name, vm.Node.HostNode, p.Downloads[vm.Download].HostNode)
		}
	}
}

func TestSharedDatastoreOneDownload(t *testing.T) {
	t.Parallel()

	p := Build(cluster(t, func(in *spec.Input) { in.Image.SharedDatastore = new(true) }))
	if len(p.Downloads) != 1 || p.Downloads[0].Key != "image" || p.Downloads[0].HostNode != "pve1" {
		t.Fatalf("downloads = %+v", p.Downloads)
	}

	for _, vm := range p.VMs {
		if vm.Download != 0 {
			t.Fatalf("%s uses download %d", vm.Node.Name, vm.Download)
		}
	}
}

func TestISOContent(t *testing.T) {
	t.Parallel()

	p := Build(cluster(t, func(in *spec.Input) { in.Image.ContentType = "iso" }))
	d := p.Downloads[0]
	if d.ContentType != "iso" || d.Decompression != "gz" || !strings.HasSuffix(d.URL, ".raw.gz") || !strings.HasSuffix(d.FileName, ".img") {
		t.Fatalf("download = %+v", d)
	}
}

func TestVMLayout(t *testing.T) {
	t.Parallel()

	p := Build(cluster(t, nil))
	w := p.VMs[3]
	if w.Node.Name != "w-1" {
		t.Fatalf("VM order: %s", w.Node.Name)
	}

	if len(w.Disks) != 2 || !w.Disks[0].FromImage || w.Disks[0].Interface != "scsi0" ||
		w.Disks[1].Interface != "scsi1" || w.Disks[1].Serial != "data-3e793e00" || w.Disks[1].SizeGiB != 50 {
		t.Fatalf("disks = %+v", w.Disks)
	}

	if len(w.Hostpcis) != 1 || w.Hostpcis[0].Device != "hostpci0" || w.Hostpcis[0].Mapping != "gpu" || !w.Hostpcis[0].PCIe || !w.Hostpcis[0].ROMBar {
		t.Fatalf("hostpcis = %+v", w.Hostpcis)
	}

	if w.IPv4Address != "10.0.0.21/24" || w.IPv4Gateway != "10.0.0.1" || !w.Agent || w.EFIDisk {
		t.Fatalf("vm = %+v", w)
	}

	// A mounted disk keeps its serial when another disk is removed from the list.
	moved := Build(cluster(t, func(in *spec.Input) {
		w := in.Nodes["w-1"]
		w.DataDisks = []spec.DataDiskInput{{SizeGiB: 10, MountPath: "/var/mnt/scratch"}, {SizeGiB: 50, MountPath: "/var/lib/longhorn"}}
		in.Nodes["w-1"] = w
	}))
	if got := moved.VMs[3].Disks[2].Serial; got != "data-3e793e00" {
		t.Errorf("the longhorn disk's serial changed with its position: %s", got)
	}

	dhcp := Build(cluster(t, func(in *spec.Input) {
		in.Network = spec.NetworkInput{DHCP: new(true), Gateway: "10.0.0.1"}
		for k, n := range in.Nodes {
			n.IP = ""
			in.Nodes[k] = n
		}
		in.NodeDefaults.BIOS = "ovmf"
	}))
	if v := dhcp.VMs[0]; v.IPv4Address != "dhcp" || v.IPv4Gateway != "" || !v.EFIDisk {
		t.Fatalf("dhcp vm = %+v", v)
	}
}

// TestNodeImages: a node with its own image gets one download of it per host that runs it (and
// the cluster image's downloads keep their keys); its VM is made from it, with the guest agent
// only if its image has the extension; with a shared datastore, one download per schematic.
func TestNodeImages(t *testing.T) {
	t.Parallel()

	gpu := []string{"siderolabs/nvidia-container-toolkit-production", "siderolabs/nonfree-kmod-nvidia-production"}
	c := cluster(t, func(in *spec.Input) {
		w := in.Nodes["w-1"]
		w.Image = &spec.NodeImageInput{Extensions: gpu}
		in.Nodes["w-1"] = w
	})

	own := c.ImageOf(c.Nodes[slices.IndexFunc(c.Nodes, func(n spec.Node) bool { return n.Name == "w-1" })])
	if own.SchematicID == c.Image.SchematicID || own.GuestAgent || !strings.Contains(own.InstallerImage, own.SchematicID) {
		t.Fatalf("w-1's image %+v is not its own", own)
	}

	p := Build(c)

	var keys []string
	for _, d := range p.Downloads {
		keys = append(keys, d.Key+" "+d.HostNode+" "+d.SchematicID[:8])

		if !strings.Contains(d.URL, "/"+d.SchematicID+"/") || !strings.Contains(d.FileName, d.SchematicID[:16]) {
			t.Errorf("download %s: url %s, file %s are not of schematic %s", d.Key, d.URL, d.FileName, d.SchematicID)
		}
	}

	want := []string{
		"image-pve1 pve1 " + c.Image.SchematicID[:8],
		"image-pve2 pve2 " + c.Image.SchematicID[:8],
		"image-pve2-" + own.SchematicID[:16] + " pve2 " + own.SchematicID[:8],
	}
	if !slices.Equal(keys, want) {
		t.Errorf("downloads %v, want %v", keys, want)
	}

	for _, v := range p.VMs {
		d := p.Downloads[v.Download]
		if wantOwn := v.Node.Name == "w-1"; (d.SchematicID == own.SchematicID) != wantOwn || v.Agent == wantOwn {
			t.Errorf("%s is made from %s (agent %v)", v.Node.Name, d.Key, v.Agent)
		}
	}

	shared := Build(cluster(t, func(in *spec.Input) {
		in.Image.SharedDatastore = new(true)
		w := in.Nodes["w-1"]
		w.Image = &spec.NodeImageInput{Extensions: gpu}
		in.Nodes["w-1"] = w
	}))

	if len(shared.Downloads) != 2 || shared.Downloads[0].Key != "image" || shared.Downloads[1].Key != "image-"+own.SchematicID[:16] {
		t.Errorf("shared downloads %+v, want image and image-%s", shared.Downloads, own.SchematicID[:16])
	}
}
