// Package talosstandin is a stand-in for the pulumiverse talos provider v0.7.1, for the local
// lab only: the real plugin cannot be downloaded or built here. It serves the published schema
// (lab/schemas, copied unchanged from the v0.7.1 release) and implements, with Talos' own
// machinery and client, what the TalosProxmoxCluster component uses: machine secrets, machine
// configuration, client configuration, configuration apply, bootstrap, kubeconfig and Image
// Factory schematics. Tokens and property names come from the schema file, not from code.
package talosstandin

import (
	"context"
	"fmt"
	"slices"
	"sync"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/schemas"
)

// The tokens the stand-in implements: what the TalosProxmoxCluster component uses. Each must
// exist in the published schema (checked by New and by a test).
const (
	TokenSecrets            = "talos:machine/secrets:Secrets"
	TokenConfigurationApply = "talos:machine/configurationApply:ConfigurationApply"
	TokenBootstrap          = "talos:machine/bootstrap:Bootstrap"
	TokenKubeconfig         = "talos:cluster/kubeconfig:Kubeconfig"
	TokenSchematic          = "talos:imageFactory/schematic:Schematic"
	TokenGetConfiguration   = "talos:machine/getConfiguration:getConfiguration"
	TokenClientConfig       = "talos:client/getConfiguration:getConfiguration"
)

// Implemented lists the resource and function tokens the stand-in serves.
var Implemented = struct{ Resources, Functions []string }{
	Resources: []string{TokenSecrets, TokenConfigurationApply, TokenBootstrap, TokenKubeconfig, TokenSchematic},
	Functions: []string{TokenGetConfiguration, TokenClientConfig},
}

// DefaultFactoryURL is the provider's default imageFactoryUrl.
const DefaultFactoryURL = "https://factory.talos.dev"

type server struct {
	schema *schemas.Schema

	mu         sync.Mutex
	factoryURL string
}

// New returns the stand-in provider.
func New() (p.Provider, error) {
	s, err := schemas.Talos()
	if err != nil {
		return p.Provider{}, err
	}

	for _, t := range Implemented.Resources {
		if _, ok := s.Resources[t]; !ok {
			return p.Provider{}, fmt.Errorf("resource %s is not in the published schema", t)
		}
	}

	for _, t := range Implemented.Functions {
		if _, ok := s.Functions[t]; !ok {
			return p.Provider{}, fmt.Errorf("function %s is not in the published schema", t)
		}
	}

	srv := &server{schema: s, factoryURL: DefaultFactoryURL}

	return p.Provider{
		GetSchema: func(context.Context, p.GetSchemaRequest) (p.GetSchemaResponse, error) {
			return p.GetSchemaResponse{Schema: string(schemas.TalosJSON)}, nil
		},
		CheckConfig: func(_ context.Context, req p.CheckRequest) (p.CheckResponse, error) {
			return p.CheckResponse{Inputs: req.Inputs}, nil
		},
		Configure: srv.configure,
		Check:     srv.check,
		Diff:      srv.diff,
		Create:    srv.create,
		Read:      srv.read,
		Update:    srv.update,
		Delete:    srv.delete,
		Invoke:    srv.invoke,
	}, nil
}

func (s *server) configure(_ context.Context, req p.ConfigureRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	if v := req.Args.Get("imageFactoryUrl"); v.IsString() && v.AsString() != "" {
		s.factoryURL = v.AsString()
	} else if v, ok := req.Variables["talos:config:imageFactoryUrl"]; ok && v != "" { //nolint:staticcheck // engines that send no Args send Variables
		s.factoryURL = v
	}

	return nil
}

func (s *server) check(_ context.Context, req p.CheckRequest) (p.CheckResponse, error) {
	return p.CheckResponse{Inputs: req.Inputs, Failures: s.schema.CheckResource(string(req.Urn.Type()), req.Inputs)}, nil
}

func (s *server) invoke(_ context.Context, req p.InvokeRequest) (p.InvokeResponse, error) {
	token := string(req.Token)
	if failures := s.schema.CheckFunction(token, req.Args); len(failures) > 0 {
		return p.InvokeResponse{Failures: failures}, nil
	}

	var (
		out property.Map
		err error
	)

	switch token {
	case TokenGetConfiguration:
		out, err = machineConfiguration(req.Args)
	case TokenClientConfig:
		out, err = talosConfiguration(req.Args)
	default:
		return p.InvokeResponse{}, fmt.Errorf("%s is not implemented by the lab's talos stand-in", token)
	}

	return p.InvokeResponse{Return: out}, err
}

// replaceKeys are the inputs whose change replaces a resource (everything else updates).
var replaceKeys = map[string][]string{
	TokenSecrets:            {"talosVersion"},
	TokenBootstrap:          {"node", "endpoint", "clientConfiguration"},
	TokenKubeconfig:         {"node", "endpoint", "clientConfiguration"},
	TokenSchematic:          {"schematic"},
	TokenConfigurationApply: {},
}

func (s *server) diff(_ context.Context, req p.DiffRequest) (p.DiffResponse, error) {
	token := string(req.Urn.Type())
	detailed := map[string]p.PropertyDiff{}

	keys := map[string]bool{}
	for k := range req.Inputs.All {
		keys[k] = true
	}

	for k := range req.OldInputs.All {
		keys[k] = true
	}

	for k := range keys {
		if slices.Contains(req.IgnoreChanges, k) {
			continue
		}

		old, nu := req.OldInputs.Get(k), req.Inputs.Get(k)
		if old.Equals(nu) {
			continue
		}

		kind := p.Update
		switch {
		case old.IsNull():
			kind = p.Add
		case nu.IsNull():
			kind = p.Delete
		}

		if slices.Contains(replaceKeys[token], k) {
			kind += "&replace"
		}

		detailed[k] = p.PropertyDiff{Kind: kind, InputDiff: true}
	}

	return p.DiffResponse{HasChanges: len(detailed) > 0, DetailedDiff: detailed}, nil
}

func (s *server) create(ctx context.Context, req p.CreateRequest) (p.CreateResponse, error) {
	token := string(req.Urn.Type())
	in := req.Properties

	if req.DryRun {
		return p.CreateResponse{ID: "", Properties: previewOutputs(token, in)}, nil
	}

	switch token {
	case TokenSecrets:
		b, err := newSecrets(str(in, "talosVersion"))
		if err != nil {
			return p.CreateResponse{}, err
		}

		cc, err := clientConfigurationValue(b)
		if err != nil {
			return p.CreateResponse{}, err
		}

		return p.CreateResponse{ID: "machine_secrets", Properties: withOutputs(in, map[string]property.Value{
			"machineSecrets": machineSecretsValue(b), "clientConfiguration": cc,
			"talosVersion": property.New(str(in, "talosVersion")),
		})}, nil
	case TokenConfigurationApply:
		out, err := applyConfiguration(ctx, in, req.Timeout, "create")
		return p.CreateResponse{ID: "machine_configuration_apply", Properties: out}, err
	case TokenBootstrap:
		out, err := bootstrap(ctx, in, req.Timeout)
		return p.CreateResponse{ID: "machine_bootstrap", Properties: out}, err
	case TokenKubeconfig:
		out, err := kubeconfig(ctx, in, req.Timeout)
		return p.CreateResponse{ID: "cluster_kubeconfig", Properties: out}, err
	case TokenSchematic:
		s.mu.Lock()
		url := s.factoryURL
		s.mu.Unlock()

		id, err := createSchematic(ctx, url, str(in, "schematic"))

		return p.CreateResponse{ID: id, Properties: in}, err
	}

	return p.CreateResponse{}, fmt.Errorf("%s is not implemented by the lab's talos stand-in", token)
}

// previewOutputs are the inputs plus unknown computed outputs.
func previewOutputs(token string, in property.Map) property.Map {
	unknown := property.New(property.Computed)
	computed := map[string][]string{
		TokenSecrets:            {"machineSecrets", "clientConfiguration"},
		TokenConfigurationApply: {"machineConfiguration", "resolvedApplyMode"},
		TokenKubeconfig:         {"kubeconfigRaw", "kubernetesClientConfiguration"},
	}[token]

	out := map[string]property.Value{}
	for _, k := range computed {
		out[k] = unknown
	}

	return withOutputs(in, out)
}

func (s *server) update(ctx context.Context, req p.UpdateRequest) (p.UpdateResponse, error) {
	token := string(req.Urn.Type())
	if req.DryRun {
		return p.UpdateResponse{Properties: previewOutputs(token, req.Inputs)}, nil
	}

	switch token {
	case TokenConfigurationApply:
		out, err := applyConfiguration(ctx, req.Inputs, req.Timeout, "update")
		return p.UpdateResponse{Properties: out}, err
	default:
		// Other resources only update inputs that change nothing on the node.
		merged := map[string]property.Value{}
		for k, v := range req.State.All {
			merged[k] = v
		}

		for k, v := range req.Inputs.All {
			merged[k] = v
		}

		return p.UpdateResponse{Properties: property.NewMap(merged)}, nil
	}
}

// read is a no-op, as upstream's: no drift detection.
func (s *server) read(_ context.Context, req p.ReadRequest) (p.ReadResponse, error) {
	return p.ReadResponse{ID: req.ID, Properties: req.Properties, Inputs: req.Inputs}, nil
}

func (s *server) delete(ctx context.Context, req p.DeleteRequest) error {
	if string(req.Urn.Type()) == TokenConfigurationApply {
		return resetOnDestroy(ctx, req.Properties, req.Timeout)
	}

	return nil
}
