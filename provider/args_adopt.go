package provider

import (
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Secrets are an existing cluster's Talos secrets, for adopting that cluster.
type Secrets struct {
	Bundle pulumi.StringInput `pulumi:"bundle" provider:"secret"`
}

// Annotate documents the secrets.
func (s *Secrets) Annotate(an infer.Annotator) { describeType(an, s) }
