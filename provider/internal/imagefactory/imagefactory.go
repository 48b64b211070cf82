// Package imagefactory computes Talos Image Factory schematics, their ids and the URLs of the
// images and installers built from them, locally and without a network call, so that image
// URLs and file names are known at preview time.
//
// The id is computed by the Image Factory's own code (github.com/siderolabs/image-factory
// pkg/schematic): the lowercase hex sha256 of the canonical YAML form of the schematic.
package imagefactory

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/siderolabs/image-factory/pkg/schematic"
)

// GuestAgentExtension is the official extension that runs the QEMU guest agent in Talos.
const GuestAgentExtension = "siderolabs/qemu-guest-agent"

// Schematic is a parsed and canonicalised schematic.
type Schematic struct {
	// YAML is the canonical text the factory stores; it is what the component registers.
	YAML string
	// ID is the schematic id the factory assigns to YAML.
	ID string
	// Extensions are the official system extensions the schematic installs.
	Extensions []string
}

// FromExtensions builds the schematic that installs exactly the given official extensions.
// The order of extensions is kept: the factory hashes the list as written.
func FromExtensions(extensions []string) (Schematic, error) {
	s := schematic.Schematic{}
	s.Customization.SystemExtensions.OfficialExtensions = slices.Clone(extensions)

	return canonical(&s)
}

// Parse reads a raw schematic YAML document the way the factory does (unknown fields are an
// error) and returns its canonical form.
func Parse(text string) (Schematic, error) {
	s, err := schematic.Unmarshal([]byte(text))
	if err != nil {
		return Schematic{}, fmt.Errorf("parsing schematic: %w", err)
	}

	return canonical(s)
}

func canonical(s *schematic.Schematic) (Schematic, error) {
	data, err := s.Marshal()
	if err != nil {
		return Schematic{}, fmt.Errorf("marshalling schematic: %w", err)
	}

	id, err := s.ID()
	if err != nil {
		return Schematic{}, fmt.Errorf("computing schematic id: %w", err)
	}

	return Schematic{
		YAML:       string(data),
		ID:         id,
		Extensions: slices.Clone(s.Customization.SystemExtensions.OfficialExtensions),
	}, nil
}

// HasExtension reports whether the schematic installs the named official extension.
func (s Schematic) HasExtension(name string) bool {
	return slices.Contains(s.Extensions, name)
}

// ImageURL is the factory URL of the disk image for a platform and architecture:
// `<factory>/image/<schematic>/<version>/<platform>-<arch>[-secureboot].<ext>`, where ext is
// `qcow2` (imported by Proxmox through the API) or `raw.gz` (decompressed into an ISO datastore).
// The Secure Boot image boots a signed systemd-boot and unified kernel image (UKI) only.
func ImageURL(factoryURL, schematicID, talosVersion, platform, arch, ext string, secureBoot bool) string {
	return fmt.Sprintf("%s/image/%s/%s/%s-%s%s.%s",
		strings.TrimRight(factoryURL, "/"), schematicID, talosVersion, platform, arch, secureBootSuffix(secureBoot), ext)
}

// InstallerImage is the installer container image Talos installs and upgrades from:
// `<factory host>/<platform>-installer[-secureboot]/<schematic>:<version>`. A node booted with
// Secure Boot must install and upgrade from the Secure Boot installer (signed UKI), and a node
// without it from the other.
func InstallerImage(factoryURL, platform, schematicID, talosVersion string, secureBoot bool) (string, error) {
	host, err := FactoryHost(factoryURL)
	if err != nil {
		return "", err
	}

	return fmt.Sprintf("%s/%s-installer%s/%s:%s", host, platform, secureBootSuffix(secureBoot), schematicID, talosVersion), nil
}

func secureBootSuffix(on bool) string {
	if on {
		return "-secureboot"
	}

	return ""
}

// FactoryHost is the registry host (with port, if any) of a factory URL such as
// `https://factory.talos.dev`.
func FactoryHost(factoryURL string) (string, error) {
	u, err := url.Parse(factoryURL)
	if err != nil {
		return "", fmt.Errorf("parsing factory URL %q: %w", factoryURL, err)
	}

	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("factory URL %q must be an absolute http(s) URL such as https://factory.talos.dev", factoryURL)
	}

	if u.Path != "" && u.Path != "/" {
		return "", fmt.Errorf("factory URL %q must not have a path", factoryURL)
	}

	return u.Host, nil
}
