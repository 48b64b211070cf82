package wire

import (
	"fmt"

	"github.com/muhlba91/pulumi-proxmoxve/sdk/v7/go/proxmoxve/download"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	talos "github.com/pulumiverse/pulumi-talos/sdk/go/talos"
	"github.com/pulumiverse/pulumi-talos/sdk/go/talos/imagefactory"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/plan"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/spec"
)

// ImageFile is the Talos image a node's VM is made from: a download of the plan, or the image
// already on the host (plan.Existing) that an adopted cluster's tool put there.
type ImageFile struct {
	ID pulumi.StringOutput
	// ISO: a raw image in iso content, a disk's fileId; else an image to import (importFrom).
	ISO bool
}

// Image registers the Talos images: each schematic with the Image Factory (the cluster's, and
// each node image's), then one download per (Proxmox host, datastore, schematic) of the plan
// without an image already there, which the VMs are created from. It returns the image files,
// in the plan's order.
func Image(s Scope, p *plan.Plan) ([]ImageFile, error) {
	schematics, err := schematics(s)
	if err != nil {
		return nil, err
	}

	return downloads(s, p, schematics)
}

// schematics registers the schematic of each image the cluster has (spec.Cluster.Images) with
// the Image Factory at image.factoryUrl, through a talos provider configured for that factory,
// by schematic id. Their ids are already known (computed locally). The cluster's is
// `<name>-schematic`, a node image's `<name>-schematic-<first 16 of its id>`.
func schematics(s Scope) (map[string]pulumi.Resource, error) {
	img := s.Cluster.Image

	prov, err := talos.NewProvider(s.Ctx, s.child("talos"), &talos.ProviderArgs{
		ImageFactoryUrl: pulumi.String(img.FactoryURL),
	}, s.parent())
	if err != nil {
		return nil, errorf("registering the talos provider for %s: %w", img.FactoryURL, err)
	}

	out := map[string]pulumi.Resource{}

	for _, i := range s.Cluster.Schematics() {
		name := s.child("schematic")
		if i.SchematicID != img.SchematicID {
			name += "-" + i.SchematicID[:16]
		}

		r, err := imagefactory.NewSchematic(s.Ctx, name, &imagefactory.SchematicArgs{
			Schematic: pulumi.String(i.SchematicYAML),
		}, s.parent(), pulumi.Provider(prov))
		if err != nil {
			return nil, errorf("registering the image schematic %s: %w", i.SchematicID, err)
		}

		out[i.SchematicID] = r
	}

	return out, nil
}

// downloads registers one image download per (Proxmox host, datastore), or one in total on a
// shared datastore. They wait for the schematic: the factory only serves registered schematics.
// A download whose image is already on the host is not registered: the VMs use that image.
func downloads(s Scope, p *plan.Plan, schematics map[string]pulumi.Resource) ([]ImageFile, error) {
	var files []ImageFile

	for _, d := range p.Downloads {
		schematic := schematics[d.SchematicID]

		if e := d.Existing; e.VolID != "" {
			s.info(fmt.Sprintf("image: %s reuses the Talos image %s already there; nothing is downloaded", d.HostNode, e.VolID))
			// Through the schematic's URN: what uses the image (the VMs, then the upgrades from
			// the factory's installer) still waits for the schematic's registration.
			id := schematic.URN().ApplyT(func(pulumi.URN) string { return e.VolID }).(pulumi.StringOutput)
			files = append(files, ImageFile{ID: id, ISO: e.ISO})

			continue
		}

		args := &download.FileArgs{
			ContentType: pulumi.String(d.ContentType),
			DatastoreId: pulumi.String(d.DatastoreID),
			NodeName:    pulumi.String(d.HostNode),
			Url:         pulumi.String(d.URL),
			FileName:    pulumi.String(d.FileName),
			// Unset for an image that is not compressed.
			DecompressionAlgorithm: optionalString(d.Decompression),
		}

		// The file name stays the same across a replacement (a new factory URL, for one), so the
		// old file must go first; Proxmox keeps imported disks, which are copies. With
		// overwrite on, the provider would compare the compressed size upstream with the
		// decompressed file on disk and replace an iso image after every refresh.
		args.Overwrite = pulumi.Bool(false)
		// A download whose task status read failed (a busy Proxmox) leaves the file on the
		// datastore but not in the state; the retried download replaces it instead of failing
		// on "file already exists". The name carries the cluster, so the file is this
		// cluster's own.
		args.OverwriteUnmanaged = pulumi.Bool(true)

		opts := []pulumi.ResourceOption{s.parent(), pulumi.DependsOn([]pulumi.Resource{schematic}), pulumi.DeleteBeforeReplace(true)}
		if s.Cluster.Image.SharedDatastore {
			// One file serves every host: which host downloaded it must not matter later
			// (adding a host that sorts first would otherwise move, and so replace, it).
			opts = append(opts, pulumi.IgnoreChanges([]string{"nodeName"}))
		}

		f, err := download.NewFile(s.Ctx, s.child(d.Key), args, opts...)
		if err != nil {
			return nil, errorf("registering the image download on %s: %w", d.HostNode, err)
		}

		files = append(files, ImageFile{ID: f.ID().ToStringOutput(), ISO: d.ContentType == string(spec.ContentISO)})
	}

	return files, nil
}
