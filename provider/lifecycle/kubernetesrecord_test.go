package lifecycle

import (
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"
)

// The record keeps what it is given, at preview and at up: which version that is (the state's,
// through ignoreChanges, or kubernetesVersion) is the component's choice.
func TestKubernetesRecordKeepsWhatItIsGiven(t *testing.T) {
	t.Parallel()

	r := &KubernetesRecord{}
	in := KubernetesRecordArgs{KubernetesVersion: "v1.34.1"}

	for _, dryRun := range []bool{false, true} {
		created, err := r.Create(t.Context(), infer.CreateRequest[KubernetesRecordArgs]{Inputs: in, DryRun: dryRun})
		if err != nil || created.ID == "" || created.Output.KubernetesVersion != "v1.34.1" {
			t.Errorf("create (preview %v): %+v, %v", dryRun, created, err)
		}

		next := KubernetesRecordArgs{KubernetesVersion: "v1.35.0"}

		updated, err := r.Update(t.Context(), infer.UpdateRequest[KubernetesRecordArgs, KubernetesRecordState]{
			Inputs: next, State: created.Output, DryRun: dryRun,
		})
		if err != nil || updated.Output.KubernetesVersion != "v1.35.0" {
			t.Errorf("update (preview %v): %+v, %v", dryRun, updated, err)
		}
	}
}
