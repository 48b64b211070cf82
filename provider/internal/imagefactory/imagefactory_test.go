package imagefactory

import (
	"testing"
)

// Vectors from siderolabs/image-factory pkg/schematic tests and the factory itself.
func TestSchematicIDs(t *testing.T) {
	t.Parallel()

	cases := []struct {
		name, yaml, id string
	}{
		{"empty", "{}\n", "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"},
		{"empty customization", "customization: {}\n", "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"},
		{"qemu-guest-agent", "customization:\n  systemExtensions:\n    officialExtensions:\n      - siderolabs/qemu-guest-agent\n",
			"ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515"},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			s, err := Parse(tc.yaml)
			if err != nil {
				t.Fatal(err)
			}

			if s.ID != tc.id {
				t.Fatalf("id = %s, want %s", s.ID, tc.id)
			}
		})
	}
}

func TestFromExtensionsMatchesParse(t *testing.T) {
	t.Parallel()

	a, err := FromExtensions([]string{GuestAgentExtension})
	if err != nil {
		t.Fatal(err)
	}

	if a.ID != "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515" {
		t.Fatalf("id = %s", a.ID)
	}

	b, err := Parse(a.YAML)
	if err != nil {
		t.Fatal(err)
	}

	if a.ID != b.ID || a.YAML != b.YAML {
		t.Fatalf("canonical form not stable: %q vs %q", a.YAML, b.YAML)
	}

	if !a.HasExtension(GuestAgentExtension) || a.HasExtension("siderolabs/iscsi-tools") {
		t.Fatal("HasExtension wrong")
	}
}

func TestParseRejectsUnknownFields(t *testing.T) {
	t.Parallel()

	if _, err := Parse("customization:\n  systemExtension: {}\n"); err == nil {
		t.Fatal("expected an error for a misspelled field")
	}
}

func TestURLs(t *testing.T) {
	t.Parallel()

	id := "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515"

	got := ImageURL("https://factory.talos.dev/", id, "v1.11.5", "nocloud", "amd64", "qcow2", false)
	want := "https://factory.talos.dev/image/" + id + "/v1.11.5/nocloud-amd64.qcow2"
	if got != want {
		t.Fatalf("ImageURL = %s, want %s", got, want)
	}

	// The factory's names for Secure Boot assets (image-factory's registry and profile parsing).
	if got := ImageURL("https://factory.talos.dev", id, "v1.14.1", "nocloud", "amd64", "qcow2", true); got !=
		"https://factory.talos.dev/image/"+id+"/v1.14.1/nocloud-amd64-secureboot.qcow2" {
		t.Fatalf("Secure Boot ImageURL = %s", got)
	}

	if inst, _ := InstallerImage("https://factory.talos.dev", "nocloud", id, "v1.14.1", true); inst !=
		"factory.talos.dev/nocloud-installer-secureboot/"+id+":v1.14.1" {
		t.Fatalf("Secure Boot InstallerImage = %s", inst)
	}

	inst, err := InstallerImage("https://factory.talos.dev", "nocloud", id, "v1.11.5", false)
	if err != nil {
		t.Fatal(err)
	}

	if inst != "factory.talos.dev/nocloud-installer/"+id+":v1.11.5" {
		t.Fatalf("InstallerImage = %s", inst)
	}

	inst, err = InstallerImage("http://127.0.0.1:8080", "nocloud", id, "v1.11.5", false)
	if err != nil || inst != "127.0.0.1:8080/nocloud-installer/"+id+":v1.11.5" {
		t.Fatalf("InstallerImage with port = %s, %v", inst, err)
	}

	for _, bad := range []string{"factory.talos.dev", "ftp://x", "https://x/path", "://"} {
		if _, err := FactoryHost(bad); err == nil {
			t.Errorf("FactoryHost(%q): expected an error", bad)
		}
	}
}
