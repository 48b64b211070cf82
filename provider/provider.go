// Package provider is the TalosProxmoxCluster component provider: thin wiring from validated
// inputs (provider/internal/spec) and plans (provider/internal/plan, talosconfig) to child
// resources of the proxmoxve and talos providers.
package provider

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/lifecycle"
)

// Name is the Pulumi package name.
const Name = "talos-proxmox"

// versionFile is provider/VERSION, the one place the plugin's version is written: the plugin,
// the schema (and so the SDKs), the Makefile and the lab all read it from there.
//
//go:embed VERSION
var versionFile string

// releaseVersion is set when a release is linked (`make release VERSION=x.y.z` passes
// -ldflags "-X github.com/talos-proxmox/pulumi-talos-proxmox/provider.releaseVersion=x.y.z");
// empty in development builds.
var releaseVersion string

// Version is the provider version: the release's when the binary was built by `make release`,
// else provider/VERSION.
var Version = pickVersion(releaseVersion, versionFile)

func pickVersion(release, file string) string {
	if release != "" {
		return release
	}

	return strings.TrimSpace(file)
}

// Repository is where the project lives; its GitHub releases carry the plugin archives.
const Repository = "https://github.com/talos-proxmox/pulumi-talos-proxmox"

// PluginDownloadURL tells the Pulumi engine where to download the plugin when a program needs a
// version that is not installed: the GitHub releases of Repository, tag v<version>, asset
// pulumi-resource-talos-proxmox-v<version>-<os>-<arch>.tar.gz (what `make release` builds).
const PluginDownloadURL = "github://api.github.com/talos-proxmox/pulumi-talos-proxmox"

// Provider returns the component provider.
func Provider() (p.Provider, error) {
	prov, err := infer.NewProviderBuilder().
		WithDisplayName("Talos on Proxmox").
		WithDescription("Talos Linux Kubernetes clusters on Proxmox VE, as one Pulumi component.").
		WithKeywords("kubernetes", "talos", "proxmox", "category/infrastructure", "kind/component").
		WithHomepage(Repository).
		WithRepository(Repository).
		WithPublisher("talos-proxmox").
		WithLicense("Apache-2.0").
		WithPluginDownloadURL(PluginDownloadURL).
		WithNamespace("talos-proxmox").
		WithLanguageMap(map[string]any{
			"go": map[string]any{
				"importBasePath":                 "github.com/talos-proxmox/pulumi-talos-proxmox/sdk/go/talosproxmox",
				"generateResourceContainerTypes": true,
				"respectSchemaVersion":           true,
			},
			"nodejs": map[string]any{
				"packageName":          "@talos-proxmox/pulumi",
				"respectSchemaVersion": true,
			},
			"python": map[string]any{
				"packageName":          "pulumi_talos_proxmox",
				"respectSchemaVersion": true,
				"pyproject":            map[string]any{"enabled": true},
			},
		}).
		WithModuleMap(map[tokens.ModuleName]tokens.ModuleName{"provider": "index"}).
		WithComponents(infer.ComponentF(NewTalosProxmoxCluster)).
		WithResources(lifecycle.Resources()...).
		Build()
	if err != nil {
		return p.Provider{}, err
	}

	getSchema := prov.GetSchema
	prov.GetSchema = func(ctx context.Context, req p.GetSchemaRequest) (p.GetSchemaResponse, error) {
		resp, err := getSchema(ctx, req)
		if err != nil {
			return resp, err
		}

		fixed, err := fixSchema(resp.Schema)
		if err != nil {
			return resp, fmt.Errorf("finishing the schema: %w", err)
		}

		resp.Schema = fixed

		return resp, nil
	}

	construct := prov.Construct
	prov.Construct = func(ctx context.Context, req p.ConstructRequest) (p.ConstructResponse, error) {
		if err := checkPlainInputs(req.Inputs); err != nil {
			return p.ConstructResponse{}, err
		}

		resp, err := construct(ctx, req)
		if err != nil && req.DryRun && cancelled(err) {
			// A preview that one of the children refused (a removal that would lose etcd quorum,
			// a Talos jump Talos does not support) has its refusal reported by the engine, which
			// then cancels this construct while it still waits for the outputs that come through
			// the refused child. That "context canceled" is not a second failure: the refusal must
			// be the only error. A preview records nothing, so answering with no outputs costs
			// nothing; at `up` the error stands, so a failed up never records the component
			// without its outputs.
			return p.ConstructResponse{Urn: req.Urn}, nil
		}

		return resp, err
	}

	return prov, nil
}

// Schema returns the provider's schema as indented JSON, as `make schema` writes it.
func Schema(ctx context.Context) ([]byte, error) {
	prov, err := Provider()
	if err != nil {
		return nil, err
	}

	// The in-memory server supplies the run information GetSchema needs (package name and
	// version) without starting a plugin.
	server, err := integration.NewServer(ctx, Name, semver.MustParse(Version), integration.WithProvider(prov))
	if err != nil {
		return nil, err
	}

	resp, err := server.GetSchema(p.GetSchemaRequest{})
	if err != nil {
		return nil, err
	}

	var v any
	if err := json.Unmarshal([]byte(resp.Schema), &v); err != nil {
		return nil, err
	}

	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}

	return append(out, '\n'), nil
}

// cancelled tells whether err says the call was cancelled: a context's own error, or a gRPC call
// the engine cancelled (status Canceled, however deeply wrapped).
func cancelled(err error) bool {
	if errors.Is(err, context.Canceled) {
		return true
	}

	s, ok := status.FromError(err)

	return ok && s.Code() == codes.Canceled
}
