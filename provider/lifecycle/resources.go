package lifecycle

import (
	"reflect"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// servedResource is a resource the plugin serves: infer's resource, and its State type, which
// the tests check the outputs view of its Kind against.
type servedResource struct {
	inferred infer.InferredResource
	state    reflect.Type
}

// serve is resource r, with Args A and State S, as the plugin serves it.
func serve[R infer.CustomResource[A, S], A, S any](r R) servedResource {
	return servedResource{inferred: infer.Resource(r), state: reflect.TypeFor[S]()}
}

// served are the resources the plugin serves, one of each; each has a Kind the component
// registers it through (TestKindsCoverSchema checks the two lists and schema.json agree).
var served = []servedResource{
	serve(&NodeUpgrade{}), serve(&ClusterHealth{}), serve(&Membership{}), serve(&ManifestSync{}),
	serve(&NodeRetire{}), serve(&KubernetesUpgrade{}), serve(&KubernetesRecord{}), serve(&NodeConfig{}),
	serve(&NodeAddress{}), serve(&ClientCredentials{}), serve(&EtcdSnapshot{}), serve(&EtcdBootstrap{}),
	serve(&AdoptedSecrets{}), serve(&DeployKey{}),
}

// Resources are the resources the plugin serves, for its provider to serve.
func Resources() []infer.InferredResource {
	out := make([]infer.InferredResource, len(served))
	for i, r := range served {
		out[i] = r.inferred
	}

	return out
}
