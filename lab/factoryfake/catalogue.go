package factoryfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/siderolabs/image-factory/pkg/client"
	"github.com/siderolabs/image-factory/pkg/schematic"
)

// Official are the official system extensions the stand-in publishes for every Talos version (real
// names from the factory's catalogue). The real catalogue differs from version to version; the
// stand-in has one list, and a test makes a version lack an extension with Unpublish.
var Official = []string{
	"siderolabs/amd-ucode", "siderolabs/btrfs", "siderolabs/drbd", "siderolabs/gvisor", "siderolabs/i915",
	"siderolabs/intel-ucode", "siderolabs/iscsi-tools", "siderolabs/mdadm", "siderolabs/nfs-utils",
	"siderolabs/nonfree-kmod-nvidia-lts", "siderolabs/nonfree-kmod-nvidia-production",
	"siderolabs/nvidia-container-toolkit-lts", "siderolabs/nvidia-container-toolkit-production",
	"siderolabs/nvidia-open-gpu-kernel-modules-lts", "siderolabs/nvidia-open-gpu-kernel-modules-production",
	"siderolabs/qemu-guest-agent", "siderolabs/tailscale", "siderolabs/util-linux-tools", "siderolabs/zfs",
}

// Unpublish makes Talos version (e.g. "v1.11.5") lack the official extension name: the catalogue
// of that version omits it and an image of a schematic with it fails to build, as the real factory
// answers for an extension that version does not have.
func (s *Server) Unpublish(version, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.unpublished == nil {
		s.unpublished = map[string][]string{}
	}

	s.unpublished[version] = append(s.unpublished[version], name)
}

// officialFor is the catalogue of version.
func (s *Server) officialFor(version string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()

	return slices.DeleteFunc(slices.Clone(Official), func(e string) bool { return slices.Contains(s.unpublished[version], e) })
}

// extensions serves `GET /version/<version>/extensions/official` as the real factory does (the
// image-factory client's ExtensionInfo list).
func (s *Server) extensions(w http.ResponseWriter, version string) {
	if !strings.HasPrefix(version, "v") {
		version = "v" + version
	}

	if !Released(version) {
		http.Error(w, "version "+version+" not found", http.StatusNotFound)
		return
	}

	var out []client.ExtensionInfo
	for _, name := range s.officialFor(version) {
		out = append(out, client.ExtensionInfo{
			Name: name, Ref: "ghcr.io/" + name + ":lab", Digest: "sha256:" + strings.Repeat("0", 64), Author: "Sidero Labs",
			Description: "lab stand-in of " + name,
		})
	}

	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// missingExtension is an official extension of the registered schematic body that version does
// not publish ("" when none).
func (s *Server) missingExtension(body []byte, version string) string {
	published := s.officialFor(version)

	for _, e := range schematicExtensions(body) {
		if !slices.Contains(published, e) {
			return e
		}
	}

	return ""
}

// schematicExtensions are the official extensions of a registered schematic body.
func schematicExtensions(body []byte) []string {
	cfg, err := schematic.Unmarshal(body)
	if err != nil {
		return nil
	}

	return cfg.Customization.SystemExtensions.OfficialExtensions
}

func extensionNotFound(version, name string) string {
	return fmt.Sprintf("error building the image: extension %q is not available for Talos %s", name, version)
}

// Extensions are the official extensions of a registered schematic (nil when it is unknown): what
// a node booted from or upgraded to an image of it runs.
func (s *Server) Extensions(schematicID string) []string {
	s.mu.Lock()
	body, ok := s.schematics[schematicID]
	s.mu.Unlock()

	if !ok {
		return nil
	}

	return schematicExtensions(body)
}

// released are the Talos versions the stand-in knows: the minors the lab emulates (v1.10 to v1.15),
// any patch. The real factory answers 404 for a version it has not published.
var released = regexp.MustCompile(`^v1\.1[0-5]\.\d+$`)

// Released tells a Talos version the stand-in publishes images and a catalogue for.
func Released(version string) bool { return released.MatchString(version) }
