package lifecycle

import (
	"context"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/clientconfigs"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretsbundle"
)

// adminValidity is how long the client certificate of an adopted cluster's secrets is valid:
// ten years, as the talos provider issues the one of the secrets it generates. It only reaches
// the talos provider's resources (a new node's first configuration, the kubeconfig); the
// talosconfig and kubeconfig outputs are ClientCredentials', renewed.
const adminValidity = 10 * 365 * 24 * time.Hour

// AdoptedSecrets are the Talos secrets of a cluster the component adopted: the bundle the user
// gave, and a Talos API client certificate issued from it once and kept, in the place of the talos
// provider's generated secrets (machine.Secrets), which a cluster made elsewhere does not have.
type AdoptedSecrets struct{}

// docAdoptedSecrets describes AdoptedSecrets in the schema.
const docAdoptedSecrets = "The Talos secrets of an adopted cluster (secrets.bundle) and a Talos API client certificate issued " +
	"from them once. Registered by TalosProxmoxCluster."

// AdoptedSecretsArgs are an AdoptedSecrets' inputs.
type AdoptedSecretsArgs struct {
	Bundle   string `pulumi:"bundle" provider:"secret" doc:"The cluster's secrets bundle (talosctl gen secrets YAML, or the talos providers' machine secrets JSON)."`
	Contract string `pulumi:"contract" doc:"The configuration contract the cluster's configurations keep: the Talos minor its nodes ran when it was adopted."`
}

// AdoptedSecretsState is the bundle with the client certificate issued from it.
type AdoptedSecretsState struct {
	AdoptedSecretsArgs
	CaCertificate     string `pulumi:"caCertificate" doc:"The Talos API CA certificate (base64 PEM)."`
	ClientCertificate string `pulumi:"clientCertificate" doc:"The Talos API admin client certificate (base64 PEM)."`
	ClientKey         string `pulumi:"clientKey" provider:"secret" doc:"The client certificate's key (base64 PEM)."`
}

// Annotate documents the resource.
func (r *AdoptedSecrets) Annotate(an infer.Annotator) { an.Describe(r, docAdoptedSecrets) }

// Annotate documents the inputs.
func (a *AdoptedSecretsArgs) Annotate(an infer.Annotator) { describeFields(an, a) }

// Annotate documents the state.
func (s *AdoptedSecretsState) Annotate(an infer.Annotator) { describeFields(an, s) }

// osCA is the bundle's Talos API CA.
func (a AdoptedSecretsArgs) osCA() (clientconfigs.CertAndKey, error) {
	s, err := secretsbundle.Parse(a.Bundle)
	if err != nil {
		return clientconfigs.CertAndKey{}, err
	}

	ca := s.Certs["os"]

	return clientconfigs.CertAndKey{Cert: ca.Cert, Key: ca.Key}, nil
}

// Create issues the client certificate (at preview too when the bundle is known: issuing is
// local and sends nothing).
func (r *AdoptedSecrets) Create(_ context.Context, req infer.CreateRequest[AdoptedSecretsArgs]) (infer.CreateResponse[AdoptedSecretsState], error) {
	state := AdoptedSecretsState{AdoptedSecretsArgs: req.Inputs}
	if req.DryRun && req.Inputs.Bundle == "" {
		return infer.CreateResponse[AdoptedSecretsState]{ID: "secrets", Output: state}, nil
	}

	ca, err := req.Inputs.osCA()
	if err != nil {
		return infer.CreateResponse[AdoptedSecretsState]{}, err
	}

	client, err := clientconfigs.AdminCertificate(ca, time.Now(), adminValidity)
	if err != nil {
		return infer.CreateResponse[AdoptedSecretsState]{}, err
	}

	state.CaCertificate, state.ClientCertificate, state.ClientKey = ca.Cert, client.Cert, client.Key

	return infer.CreateResponse[AdoptedSecretsState]{ID: "secrets", Output: state}, nil
}

// Diff replaces the resource (a new client certificate) when the bundle's Talos API CA changes,
// and keeps the certificate when only the bundle's text does (another shape of the same secrets).
func (r *AdoptedSecrets) Diff(_ context.Context, req infer.DiffRequest[AdoptedSecretsArgs, AdoptedSecretsState]) (infer.DiffResponse, error) {
	if req.Inputs == req.State.AdoptedSecretsArgs {
		return infer.DiffResponse{}, nil
	}

	diff := infer.DiffResponse{HasChanges: true, DetailedDiff: map[string]p.PropertyDiff{}}

	if req.Inputs.Contract != req.State.Contract {
		diff.DetailedDiff["contract"] = p.PropertyDiff{Kind: p.Update}
	}

	if req.Inputs.Bundle != req.State.Bundle {
		kind := p.Update
		if ca, err := req.Inputs.osCA(); err != nil || ca.Cert != req.State.CaCertificate {
			kind = p.UpdateReplace
		}

		diff.DetailedDiff["bundle"] = p.PropertyDiff{Kind: kind}
	}

	return diff, nil
}

// Update keeps the client certificate: the CA it was issued from is the same.
func (r *AdoptedSecrets) Update(_ context.Context, req infer.UpdateRequest[AdoptedSecretsArgs, AdoptedSecretsState]) (infer.UpdateResponse[AdoptedSecretsState], error) {
	state := req.State
	state.AdoptedSecretsArgs = req.Inputs

	return infer.UpdateResponse[AdoptedSecretsState]{Output: state}, nil
}

// AdoptedSecretsOutputs is the view of the AdoptedSecrets outputs the component reads.
type AdoptedSecretsOutputs struct {
	pulumi.CustomResourceState

	Contract          pulumi.StringOutput `pulumi:"contract"`
	ClientCertificate pulumi.StringOutput `pulumi:"clientCertificate"`
	ClientKey         pulumi.StringOutput `pulumi:"clientKey"`
}

// AdoptedSecretsKind registers AdoptedSecrets.
var AdoptedSecretsKind = kindOf[AdoptedSecrets, AdoptedSecretsArgs, AdoptedSecretsOutputs]()
