package lifecycle

import (
	"context"
	"reflect"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/flux"
)

// DeployKey is an SSH key pair made once and kept in the state: Flux's deploy key, as `flux
// bootstrap` generates one. The private half is a secret; the public half is what the user adds
// to the git host. A new rotation value makes a new pair.
type DeployKey struct{}

// docDeployKey describes DeployKey in the schema.
const docDeployKey = "An ed25519 SSH deploy key made in-process and kept in the state (the private half a secret), " +
	"for Flux's git repository; a new `rotation` makes a new one. Registered by TalosProxmoxCluster with flux."

// DeployKeyArgs are a DeployKey's inputs.
type DeployKeyArgs struct {
	Rotation string `pulumi:"rotation,optional" doc:"Any string: a new value makes a new key pair."`
}

// DeployKeyState is the key pair.
type DeployKeyState struct {
	DeployKeyArgs
	PublicKey  string `pulumi:"publicKey" doc:"The public key, in authorized_keys format."`
	PrivateKey string `pulumi:"privateKey" provider:"secret" doc:"The private key, OpenSSH PEM."`
}

// Annotate documents the resource.
func (r *DeployKey) Annotate(an infer.Annotator) { an.Describe(r, docDeployKey) }

// Annotate documents the inputs.
func (a *DeployKeyArgs) Annotate(an infer.Annotator) { describeFields(an, a) }

// Create makes the key pair (at preview its halves are unknown).
func (r *DeployKey) Create(ctx context.Context, req infer.CreateRequest[DeployKeyArgs]) (infer.CreateResponse[DeployKeyState], error) {
	return created(ctx, req, "deploy-key", DeployKeyState{DeployKeyArgs: req.Inputs}, func(_ context.Context, in DeployKeyArgs) (DeployKeyState, error) {
		private, public, err := flux.GenerateDeployKey()
		return DeployKeyState{DeployKeyArgs: in, PublicKey: public, PrivateKey: private}, err
	})
}

// Diff replaces the pair when the rotation changes; nothing else changes it.
func (r *DeployKey) Diff(_ context.Context, req infer.DiffRequest[DeployKeyArgs, DeployKeyState]) (infer.DiffResponse, error) {
	if reflect.DeepEqual(req.Inputs, req.State.DeployKeyArgs) {
		return infer.DiffResponse{}, nil
	}

	return infer.DiffResponse{HasChanges: true, DetailedDiff: map[string]p.PropertyDiff{"rotation": {Kind: p.UpdateReplace}}}, nil
}

// DeployKeyOutputs is the view of the DeployKey outputs the component reads.
type DeployKeyOutputs struct {
	pulumi.CustomResourceState

	// PublicKey is the public half, in authorized_keys format.
	PublicKey pulumi.StringOutput `pulumi:"publicKey"`
	// PrivateKey is the private half (a secret).
	PrivateKey pulumi.StringOutput `pulumi:"privateKey"`
}

// DeployKeyKind registers DeployKey.
var DeployKeyKind = kindOf[DeployKey, DeployKeyArgs, DeployKeyOutputs]()
