package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/schemas"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosprovider"
)

// TestChildrenMatchPublishedSchemas checks every child resource and function call the component
// makes against the published schemas of proxmoxve v7.13.0 and talos v0.7.1 (exact tokens,
// property names, types, required inputs), and that the lab's talos stand-in implements every
// talos token the component uses.
func TestChildrenMatchPublishedSchemas(t *testing.T) {
	t.Parallel()

	talos, err := schemas.Talos()
	if err != nil {
		t.Fatal(err)
	}

	pve, err := schemas.Proxmoxve()
	if err != nil {
		t.Fatal(err)
	}

	for name, inputs := range map[string]string{"static": homelabJSON, "dhcp": `{
	  "clusterName": "lab", "talosVersion": "v1.10.6", "network": {"dhcp": true},
	  "image": {"contentType": "iso", "sharedDatastore": true},
	  "nodeDefaults": {"bios": "ovmf"},
	  "nodes": {"cp-1": {"hostNode": "pve1", "role": "controlplane", "pciDevices": [{"id": "0000:01:00.0"}]}}}`} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			r := &recorder{}
			if _, err := construct(t, r, "c", inputsFromJSON(t, inputs)); err != nil {
				t.Fatal(err)
			}

			for _, reg := range r.custom() {
				var s *schemas.Schema
				switch {
				case strings.HasPrefix(reg.Type, "pulumi:providers:"):
					continue
				case strings.HasPrefix(reg.Type, "talos:"):
					s = talos
					if !slices.Contains(talosprovider.Implemented.Resources, reg.Type) {
						t.Errorf("the component uses %s, which the lab's talos stand-in does not implement", reg.Type)
					}
				case strings.HasPrefix(reg.Type, "proxmoxve:"):
					s = pve
				default:
					t.Errorf("unexpected child type %s", reg.Type)
					continue
				}

				for _, f := range s.CheckResource(reg.Type, reg.Inputs) {
					t.Errorf("%s %s: %s: %s", reg.Type, reg.Name, f.Property, f.Reason)
				}
			}

			for _, inv := range r.invokes {
				if !slices.Contains(talosprovider.Implemented.Functions, inv.Token) {
					t.Errorf("the component calls %s, which the lab's talos stand-in does not implement", inv.Token)
				}

				for _, f := range talos.CheckFunction(inv.Token, inv.Args) {
					t.Errorf("%s: %s: %s", inv.Token, f.Property, f.Reason)
				}
			}
		})
	}
}
