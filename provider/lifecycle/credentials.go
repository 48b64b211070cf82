package lifecycle

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/clientconfigs"
)

// ClientCredentials holds the cluster's admin talosconfig and kubeconfig, issued in-process
// from the cluster's CAs, and issues them again when their certificates come within renewBefore
// of expiring: a `pulumi up` in that window renews them, its preview shows it, and the
// component's outputs (and the day-2 resources) get the new ones.
type ClientCredentials struct{}

// docClientCredentials describes ClientCredentials in the schema.
const docClientCredentials = "The cluster's admin talosconfig and kubeconfig, issued from its CAs and renewed by the `pulumi up` " +
	"that runs within `renewBefore` of their expiry. Registered by TalosProxmoxCluster."

// ClientCredentialsArgs are a ClientCredentials' inputs.
type ClientCredentialsArgs struct {
	ClusterName string `pulumi:"clusterName" doc:"The cluster's name (the talosconfig context)."`
	Endpoint    string `pulumi:"endpoint,optional" doc:"The Kubernetes API URL."`
	TalosCA
	KubernetesCaCertificate string   `pulumi:"kubernetesCaCertificate" doc:"The Kubernetes CA certificate (base64 PEM)."`
	KubernetesCaKey         string   `pulumi:"kubernetesCaKey" provider:"secret" doc:"The Kubernetes CA key (base64 PEM)."`
	TalosEndpoints          []string `pulumi:"talosEndpoints,optional" doc:"The talosconfig's endpoints."`
	TalosNodes              []string `pulumi:"talosNodes,optional" doc:"The talosconfig's nodes."`
	Validity                string   `pulumi:"validity" doc:"How long issued certificates are valid (a duration)."`
	RenewBefore             string   `pulumi:"renewBefore" doc:"How long before expiry an up renews them (a duration)."`
}

// ClientCredentialsState is the issued credentials.
type ClientCredentialsState struct {
	ClientCredentialsArgs
	Talosconfig string `pulumi:"talosconfig" provider:"secret"`
	Kubeconfig  string `pulumi:"kubeconfig" provider:"secret"`
	// NotAfter is when the first of the two client certificates expires (RFC 3339).
	NotAfter string `pulumi:"notAfter"`
}

// Annotate documents the resource.
func (r *ClientCredentials) Annotate(an infer.Annotator) { an.Describe(r, docClientCredentials) }

// Annotate documents the inputs.
func (a *ClientCredentialsArgs) Annotate(an infer.Annotator) { describeFields(an, a) }

func issue(in ClientCredentialsArgs) (ClientCredentialsState, error) {
	validity, err := parseDuration("validity", in.Validity)
	if err != nil {
		return ClientCredentialsState{}, err
	}

	got, err := clientconfigs.Issue(clientconfigs.Input{
		ClusterName: in.ClusterName, Endpoint: in.Endpoint,
		OSCA:           in.certAndKey(),
		KubernetesCA:   clientconfigs.CertAndKey{Cert: in.KubernetesCaCertificate, Key: in.KubernetesCaKey},
		TalosEndpoints: in.TalosEndpoints, TalosNodes: in.TalosNodes, Validity: validity, Now: time.Now(),
	})
	if err != nil {
		return ClientCredentialsState{}, err
	}

	return ClientCredentialsState{
		ClientCredentialsArgs: in, Talosconfig: got.Talosconfig, Kubeconfig: got.Kubeconfig,
		NotAfter: got.NotAfter.UTC().Format(time.RFC3339),
	}, nil
}

// known tells whether the inputs credentials are issued from are known (at preview, the secrets
// of a new cluster and DHCP addresses are not; they arrive empty, which is why the addresses are
// optional inputs).
func (a ClientCredentialsArgs) known() bool {
	return a.OsCaCertificate != "" && a.OsCaKey != "" && a.KubernetesCaCertificate != "" && a.KubernetesCaKey != "" &&
		a.Endpoint != "" && a.Validity != "" && len(a.TalosEndpoints) > 0 && !slices.Contains(a.TalosEndpoints, "")
}

// issueAt issues the credentials; at preview (dryRun) too when the CAs are known (issuing is
// local and sends nothing), else the outputs are unknown.
func issueAt(in ClientCredentialsArgs, dryRun bool) (ClientCredentialsState, error) {
	if dryRun && !in.known() {
		return ClientCredentialsState{ClientCredentialsArgs: in}, nil
	}

	return issue(in)
}

// Create issues the credentials (issueAt).
func (r *ClientCredentials) Create(_ context.Context, req infer.CreateRequest[ClientCredentialsArgs]) (infer.CreateResponse[ClientCredentialsState], error) {
	s, err := issueAt(req.Inputs, req.DryRun)

	return infer.CreateResponse[ClientCredentialsState]{ID: "credentials", Output: s}, err
}

// due tells whether the certificates expire within renewBefore, and when they do.
func due(s ClientCredentialsState, renewBefore string) (bool, time.Time) {
	notAfter, err := time.Parse(time.RFC3339, s.NotAfter)
	if err != nil {
		return true, time.Time{}
	}

	window, err := time.ParseDuration(renewBefore)
	if err != nil {
		return false, notAfter
	}

	return time.Until(notAfter) <= window, notAfter
}

// sameNames tells whether the credentials in would name what those of a do (endpoints, nodes,
// CAs, validity: every input but renewBefore).
func (a ClientCredentialsArgs) sameNames(in ClientCredentialsArgs) bool {
	a.RenewBefore, in.RenewBefore = "", ""

	return reflect.DeepEqual(a, in)
}

// Diff shows an update when what the credentials name changed (endpoints, nodes, CAs, validity)
// or when they expire within renewBefore, as an update of `notAfter`.
func (r *ClientCredentials) Diff(ctx context.Context, req infer.DiffRequest[ClientCredentialsArgs, ClientCredentialsState]) (infer.DiffResponse, error) {
	d := map[string]p.PropertyDiff{}

	if !req.State.sameNames(req.Inputs) {
		d["talosconfig"] = p.PropertyDiff{Kind: p.Update}
		d["kubeconfig"] = p.PropertyDiff{Kind: p.Update}
	}

	if renew, notAfter := due(req.State, req.Inputs.RenewBefore); renew {
		p.GetLogger(ctx).Infof("the client certificates of the talosconfig and kubeconfig expire at %s, within renewBefore (%s): "+
			"this update issues new ones", notAfter.Format(time.RFC3339), req.Inputs.RenewBefore)

		d["notAfter"] = p.PropertyDiff{Kind: p.Update}
	}

	if len(d) == 0 && req.State.RenewBefore != req.Inputs.RenewBefore {
		d["renewBefore"] = p.PropertyDiff{Kind: p.Update}
	}

	return infer.DiffResponse{HasChanges: len(d) > 0, DetailedDiff: d}, nil
}

// Update issues new credentials, unless only renewBefore changed and they are not due.
func (r *ClientCredentials) Update(_ context.Context, req infer.UpdateRequest[ClientCredentialsArgs, ClientCredentialsState]) (infer.UpdateResponse[ClientCredentialsState], error) {
	if renew, _ := due(req.State, req.Inputs.RenewBefore); !renew && req.State.sameNames(req.Inputs) {
		s := req.State
		s.RenewBefore = req.Inputs.RenewBefore

		return infer.UpdateResponse[ClientCredentialsState]{Output: s}, nil
	}

	s, err := issueAt(req.Inputs, req.DryRun)
	if err != nil {
		return infer.UpdateResponse[ClientCredentialsState]{}, fmt.Errorf("renewing the client credentials: %w", err)
	}

	return infer.UpdateResponse[ClientCredentialsState]{Output: s}, nil
}

// ClientCredentialsKind registers ClientCredentials.
var ClientCredentialsKind = kindOf[ClientCredentials, ClientCredentialsArgs, CredentialsOutputs]()
