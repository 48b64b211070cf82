package provider

import "github.com/pulumi/pulumi/sdk/v3/go/pulumi"

// Secrets are an existing cluster's Talos secrets, for adopting that cluster.
type Secrets struct {
	Bundle pulumi.StringInput `pulumi:"bundle" provider:"secret"`
}
