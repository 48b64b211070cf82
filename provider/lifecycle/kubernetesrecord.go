package lifecycle

import (
	"context"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// KubernetesRecord holds the Kubernetes version a cluster runs, in the state: the component
// reads it back when kubernetesVersion is unset, so a cluster keeps the version it was created
// with (the default of its Talos version then) across Talos upgrades, and follows kubernetesVersion
// whenever that is set. Which of the two it records is the component's choice, made with
// ignoreChanges; the resource itself only keeps what it is given, and touches nothing.
type KubernetesRecord struct{}

// docKubernetesRecord describes KubernetesRecord in the schema.
const docKubernetesRecord = "The Kubernetes version the cluster runs, recorded: when kubernetesVersion is unset the cluster keeps " +
	"this version (recorded when the cluster was created: the default of its Talos version then), so a Talos upgrade " +
	"never upgrades Kubernetes; when kubernetesVersion is set, the record follows it. Registered by TalosProxmoxCluster."

// KubernetesRecordArgs are a KubernetesRecord's inputs.
type KubernetesRecordArgs struct {
	KubernetesVersion string `pulumi:"kubernetesVersion" doc:"The Kubernetes version the cluster runs."`
	ClusterName       string `pulumi:"clusterName,optional" doc:"The cluster's name (clusterName) as it was created: a running cluster keeps it."`
}

// KubernetesRecordState is the version recorded.
type KubernetesRecordState = KubernetesRecordArgs

// Annotate documents the resource.
func (r *KubernetesRecord) Annotate(an infer.Annotator) { an.Describe(r, docKubernetesRecord) }

// Annotate documents the inputs.
func (a *KubernetesRecordArgs) Annotate(an infer.Annotator) { describeFields(an, a) }

// Create records the version.
func (r *KubernetesRecord) Create(_ context.Context, req infer.CreateRequest[KubernetesRecordArgs]) (infer.CreateResponse[KubernetesRecordState], error) {
	return infer.CreateResponse[KubernetesRecordState]{ID: "kubernetes-version", Output: req.Inputs}, nil
}

// Update records the new version (kubernetesVersion was set to it).
func (r *KubernetesRecord) Update(_ context.Context, req infer.UpdateRequest[KubernetesRecordArgs, KubernetesRecordState]) (infer.UpdateResponse[KubernetesRecordState], error) {
	return infer.UpdateResponse[KubernetesRecordState]{Output: req.Inputs}, nil
}

// KubernetesRecordOutputs is the view of the KubernetesRecord outputs the component reads.
type KubernetesRecordOutputs struct {
	pulumi.CustomResourceState

	// KubernetesVersion is the version recorded.
	KubernetesVersion pulumi.StringOutput `pulumi:"kubernetesVersion"`
	// ClusterName is the name recorded.
	ClusterName pulumi.StringOutput `pulumi:"clusterName"`
}

// KubernetesRecordKind registers KubernetesRecords.
var KubernetesRecordKind = kindOf[KubernetesRecord, KubernetesRecordArgs, KubernetesRecordOutputs]()
