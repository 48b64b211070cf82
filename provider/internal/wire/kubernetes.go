package wire

import (
	"context"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/await"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/lifecycle"
)

// recordWait bounds how long Construct waits for the engine to answer the Kubernetes version
// record's registration: at once for a record in the state, the time to start this plugin for
// its lifecycle provider otherwise.
const recordWait = time.Minute

// Recorded is what RecordKubernetes returns.
type Recorded struct {
	// ClusterName is the name the cluster was created with ("" for a record made before names
	// were recorded, or not read back).
	ClusterName string

	// KubernetesVersion is the version the record holds: the one the cluster runs when
	// kubernetesVersion is unset (spec.Cluster.RunningKubernetes).
	KubernetesVersion string
}

// RecordKubernetes registers the record of the Kubernetes version the cluster runs
// (`<name>-kubernetes-version`, a KubernetesRecord) and returns what it holds, in the spirit of
// the secrets, which keep the configuration contract the cluster was created with:
//
//   - kubernetesVersion set: the record follows it (the cluster runs it);
//   - unset, on a running cluster (Proxmox holds a VM of it, or did not answer): the record
//     ignores changes, so the engine answers with the version in the state, which is what the
//     cluster runs; a record that does not exist yet (a cluster created before the record) is
//     created with the default of the Talos minor, the version the cluster was given until then;
//   - unset, on a new cluster (fresh): the default of its Talos minor, recorded now, also over
//     the record of an earlier `up` that failed before any VM.
//
// Only the running cluster's case waits for the engine's answer, bounded by recordWait; a
// record the engine does not register in this run (outside a --target) holds what it was given.
func RecordKubernetes(s Scope, fresh bool, self Lifecycle) (Recorded, error) {
	c := s.Cluster
	keep := !c.KubernetesDeclared && !fresh

	// The name the cluster was created with is kept (a record without one takes the current
	// name), unless allowDataLoss accepts a new cluster under a new name.
	var ignored []string
	if keep {
		ignored = append(ignored, "kubernetesVersion")
	}

	if !c.AllowDataLoss {
		ignored = append(ignored, "clusterName")
	}

	opts := []pulumi.ResourceOption{s.parent(), self.option, pulumi.IgnoreChanges(ignored)}

	in, a := lifecycle.KubernetesRecordKind.Inputs()
	lifecycle.Set(in, &a.KubernetesVersion, pulumi.String(c.KubernetesVersion))
	lifecycle.Set(in, &a.ClusterName, pulumi.String(c.Name))

	rec, err := lifecycle.KubernetesRecordKind.Register(s.Ctx, s.child("kubernetes-version"), in, opts...)
	if err != nil {
		return Recorded{}, errorf("registering the Kubernetes version record: %w", err)
	}

	ctx, cancel := context.WithTimeout(s.Ctx.Context(), recordWait)
	defer cancel()

	name, known, err := await.Known[string](ctx, rec.ClusterName)
	if err != nil {
		return Recorded{}, errorf("reading the cluster's name from %s: %w", s.child("kubernetes-version"), err)
	}

	recorded := Recorded{KubernetesVersion: c.KubernetesVersion}
	if known {
		recorded.ClusterName = name
	}

	if !keep {
		return recorded, nil
	}

	v, known, err := await.Known[string](ctx, rec.KubernetesVersion)
	if err != nil {
		return Recorded{}, errorf("reading the Kubernetes version the cluster runs from %s: %w", s.child("kubernetes-version"), err)
	}

	if known {
		recorded.KubernetesVersion = v
	}

	return recorded, nil
}
