package factoryfake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/siderolabs/image-factory/pkg/client"
)

const guestAgent = "customization:\n  systemExtensions:\n    officialExtensions:\n      - siderolabs/qemu-guest-agent\n"

func TestSchematicsAndImages(t *testing.T) {
	s, err := Start(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() //nolint:errcheck

	resp, err := http.Post(s.URL()+"/schematics", "application/yaml", bytes.NewBufferString(guestAgent))
	if err != nil {
		t.Fatal(err)
	}

	var out struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close() //nolint:errcheck

	// The id the real factory assigns to this schematic.
	if resp.StatusCode != http.StatusCreated || out.ID != "ce4c980550dd2ab1b17bbf2b08801c7eb59418eafe8f279833297925d67c7515" {
		t.Fatalf("POST /schematics = %d %q", resp.StatusCode, out.ID)
	}

	url := s.URL() + "/image/" + out.ID + "/v1.11.5/nocloud-amd64.qcow2"
	resp, err = http.Get(url)
	if err != nil {
		t.Fatal(err)
	}

	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close() //nolint:errcheck

	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, Image(out.ID, "v1.11.5", "nocloud-amd64.qcow2", "siderolabs/qemu-guest-agent")) ||
		!bytes.Contains(body, []byte("\nextension siderolabs/qemu-guest-agent\n")) {
		t.Fatalf("GET image = %d, %d bytes", resp.StatusCode, len(body))
	}

	// The catalogue, through the real factory client; a version without the extension lists it
	// not, and its images of a schematic with it fail to build.
	fc, err := client.New(s.URL())
	if err != nil {
		t.Fatal(err)
	}

	s.Unpublish("v1.10.9", "siderolabs/qemu-guest-agent")

	for version, want := range map[string]bool{"v1.11.5": true, "1.11.5": true, "v1.10.9": false} {
		infos, err := fc.ExtensionsVersions(t.Context(), version)
		if err != nil {
			t.Fatal(err)
		}

		if got := slices.ContainsFunc(infos, func(i client.ExtensionInfo) bool { return i.Name == "siderolabs/qemu-guest-agent" }); got != want || len(infos) < 10 {
			t.Errorf("%s: %d extensions, qemu-guest-agent listed %v, want %v", version, len(infos), got, want)
		}
	}

	if _, err := fc.ExtensionsVersions(t.Context(), "v1.99.0"); err == nil {
		t.Error("the catalogue of an unreleased version: no error")
	}

	resp, err = http.Get(s.URL() + "/image/" + out.ID + "/v1.10.9/nocloud-amd64.qcow2")
	if err != nil {
		t.Fatal(err)
	}

	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close() //nolint:errcheck

	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "qemu-guest-agent") {
		t.Errorf("an image with an unpublished extension = %d %s", resp.StatusCode, body)
	}

	if got := s.Extensions(out.ID); !slices.Equal(got, []string{"siderolabs/qemu-guest-agent"}) {
		t.Errorf("Extensions = %v", got)
	}

	resp, err = http.Get(s.URL() + "/image/0000/v1.11.5/nocloud-amd64.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() //nolint:errcheck

	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown schematic = %d, want 404", resp.StatusCode)
	}

	resp, err = http.Post(s.URL()+"/schematics", "application/yaml", bytes.NewBufferString("customization:\n  bogus: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() //nolint:errcheck

	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("invalid schematic = %d, want 400", resp.StatusCode)
	}
}

func TestLoopbackOnly(t *testing.T) {
	if _, err := Start(t.Context(), "0.0.0.0:0"); err == nil {
		t.Fatal("listening on all interfaces must be refused")
	}
}
