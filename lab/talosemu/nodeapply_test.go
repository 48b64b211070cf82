package talosemu

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestNodeSpecsFollowTheConfiguration: the labels and taints a control plane's configuration
// declares (machine.nodeLabels and nodeTaints on a v1alpha1 contract, KubeNodeConfig on v1.14)
// reach its Node as Talos' node apply sets them: the control-plane taint taken over from the
// kubelet's registration and removed when scheduling on control planes is allowed, a declared
// taint and label added, changed and removed, and a taint or label someone else set with another
// value left alone.
func TestNodeSpecsFollowTheConfiguration(t *testing.T) {
	t.Parallel()

	for _, version := range []string{"v1.11.5", "v1.14.1"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()

			kube := fake.NewClientset(&corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Labels: map[string]string{"kubernetes.io/hostname": "cp-1", "team": "theirs"}},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{
					{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}, // the kubelet registered with it
					{Key: "dedicated", Value: "theirs", Effect: corev1.TaintEffectNoSchedule},
				}},
			})

			sync := func(patch string) *corev1.Node {
				t.Helper()

				labels, taints := nodeSpecs(controlPlaneConfig(t, version, patch))
				if err := syncNodeSpecs(t.Context(), kube, "cp-1", labels, taints); err != nil {
					t.Fatal(err)
				}

				n, err := kube.CoreV1().Nodes().Get(t.Context(), "cp-1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}

				return n
			}

			multidoc := version == "v1.14.1"
			declare := func(labels, taints string, allow bool) string {
				if multidoc {
					p := "apiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels: " + labels + "\ntaints: " + taints + "\n"
					if allow {
						p = "apiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels: " + labels + "\ntaints:\n  node-role.kubernetes.io/control-plane:\n    $patch: delete\n"
						if taints != "{}" {
							t.Fatal("the test declares no taint beside allowing scheduling")
						}
					}

					return p
				}

				return "machine:\n  nodeLabels: " + labels + "\n  nodeTaints: " + taints + "\ncluster:\n  allowSchedulingOnControlPlanes: " +
					map[bool]string{true: "true", false: "false"}[allow] + "\n"
			}

			n := sync(declare(`{pool: storage, team: ours}`, `{example.com/pool: "storage:NoSchedule", dedicated: "ours:NoExecute"}`, false))
			wantTaints(t, n, "dedicated=theirs:NoSchedule", "example.com/pool=storage:NoSchedule", "node-role.kubernetes.io/control-plane:NoSchedule")

			if n.Labels["pool"] != "storage" || n.Labels["team"] != "theirs" {
				t.Errorf("labels %v: want pool=storage added, team=theirs (not Talos') kept", n.Labels)
			}

			wantOwned(t, n, ownedTaintsAnnotation, "example.com/pool", "node-role.kubernetes.io/control-plane")

			n = sync(declare(`{pool: fast}`, `{example.com/pool: "fast:PreferNoSchedule"}`, false))
			wantTaints(t, n, "dedicated=theirs:NoSchedule", "example.com/pool=fast:PreferNoSchedule", "node-role.kubernetes.io/control-plane:NoSchedule")

			if n.Labels["pool"] != "fast" || n.Labels["team"] != "theirs" {
				t.Errorf("labels %v after the change", n.Labels)
			}

			n = sync(declare(`{}`, `{}`, true))
			wantTaints(t, n, "dedicated=theirs:NoSchedule")

			if _, ok := n.Labels["pool"]; ok || n.Labels["team"] != "theirs" {
				t.Errorf("labels %v: want pool (Talos') removed, team kept", n.Labels)
			}

			n = sync(declare(`{}`, `{}`, false))
			wantTaints(t, n, "dedicated=theirs:NoSchedule", "node-role.kubernetes.io/control-plane:NoSchedule")
		})
	}
}

// controlPlaneConfig is a control plane's configuration of the Talos version's contract (as the
// facts tests generate it) with patch.
func controlPlaneConfig(t *testing.T, version, patch string) config.Provider {
	t.Helper()

	cfg, _ := factsConfig(t, version)

	p, err := configpatcher.LoadPatch([]byte(patch))
	if err != nil {
		t.Fatal(err)
	}

	out, err := configpatcher.Apply(configpatcher.WithConfig(cfg), []configpatcher.Patch{p})
	if err != nil {
		t.Fatal(err)
	}

	raw, err := out.Bytes()
	if err != nil {
		t.Fatal(err)
	}

	loaded, err := configloader.NewFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}

	return loaded
}

func wantTaints(t *testing.T, n *corev1.Node, want ...string) {
	t.Helper()

	var got []string

	for _, tn := range n.Spec.Taints {
		s := tn.Key
		if tn.Value != "" {
			s += "=" + tn.Value
		}

		got = append(got, s+":"+string(tn.Effect))
	}

	slices.Sort(got)

	if !slices.Equal(got, want) {
		t.Errorf("taints %v, want %v", got, want)
	}
}

func wantOwned(t *testing.T, n *corev1.Node, annotation string, want ...string) {
	t.Helper()

	var got []string
	if err := json.Unmarshal([]byte(n.Annotations[annotation]), &got); err != nil || !slices.Equal(got, want) {
		t.Errorf("%s = %q (%v), want %v", annotation, n.Annotations[annotation], err, want)
	}
}
