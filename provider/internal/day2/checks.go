package day2

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/cluster/check"
	"github.com/siderolabs/talos/pkg/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// clusterChecks are the health gate's checks: Talos' own (pkg/cluster/check: the boot-sequence
// checks on every node, the control plane's static pods through COSI, kube-proxy, CoreDNS) and,
// where Talos compares the whole Kubernetes node list with the expected one, the same check
// limited to the cluster's own nodes. A Node the component does not manage (one being removed in
// this very `up`, whose VM is deleted after the gate, or one managed elsewhere) neither fails
// the gate nor is touched.
func clusterChecks(kube kubernetes.Interface, nodes []Node, requireReady bool) []check.ClusterCheck {
	poll := func(name string, f func(ctx context.Context) error) check.ClusterCheck {
		return func(check.ClusterInfo) conditions.Condition { return newBackoffCondition(name, f) }
	}

	checks := check.PreBootSequenceChecks()
	checks = append(checks,
		poll("all nodes of the cluster to report in Kubernetes", func(ctx context.Context) error {
			_, err := nodesReport(ctx, kube, nodes, false)

			return err
		}),
		// Talos' check of the control plane's static pods through COSI (K8sComponentsReadinessChecks),
		// on the gates' schedule rather than every 5 s.
		func(ci check.ClusterInfo) conditions.Condition {
			return newBackoffCondition("all control plane static pods to be running", func(ctx context.Context) error {
				return check.K8sControlPlaneStaticPods(ctx, ci)
			})
		},
		poll("all control plane components to be ready", func(ctx context.Context) error {
			for _, n := range nodes {
				if n.ControlPlane {
					if err := StaticPodsRunning(ctx, kube, n.Name); err != nil {
						return err
					}
				}
			}

			return nil
		}),
	)

	if requireReady {
		checks = append(checks, poll("all nodes of the cluster to be Ready", func(ctx context.Context) error {
			_, err := nodesReport(ctx, kube, nodes, true)

			return err
		}))
	}

	return append(checks,
		func(ci check.ClusterInfo) conditions.Condition {
			return newBackoffCondition("kube-proxy to report ready", func(ctx context.Context) error {
				present, replicas, err := check.DaemonSetPresent(ctx, ci, "kube-system", "k8s-app=kube-proxy")
				if err != nil || !present {
					return skipUnless(err)
				}

				return check.K8sPodReadyAssertion(ctx, ci, replicas, "kube-system", "k8s-app=kube-proxy")
			})
		},
		func(ci check.ClusterInfo) conditions.Condition {
			return newBackoffCondition("coredns to report ready", func(ctx context.Context) error {
				if !requireReady {
					return conditions.ErrSkipAssertion // no CNI: CoreDNS cannot start
				}

				present, replicas, err := check.DeploymentPresent(ctx, ci, "kube-system", "k8s-app=kube-dns")
				if err != nil || !present {
					return skipUnless(err)
				}

				return check.K8sPodReadyAssertion(ctx, ci, replicas, "kube-system", "k8s-app=kube-dns")
			})
		},
		poll("all nodes of the cluster to be schedulable", func(ctx context.Context) error {
			list, err := nodesReport(ctx, kube, nodes, false)
			if err != nil {
				return err
			}

			var cordoned []string

			for _, n := range list {
				if n.Spec.Unschedulable {
					cordoned = append(cordoned, n.Name)
				}
			}

			if len(cordoned) > 0 {
				return fmt.Errorf("cordoned: %s (uncordon them, or finish the drain that left them so)", strings.Join(cordoned, ", "))
			}

			return nil
		}),
	)
}

func skipUnless(err error) error {
	if err != nil {
		return err
	}

	return conditions.ErrSkipAssertion
}

// nodesReport checks that every node of the cluster has its Kubernetes Node, at its address
// (and, with ready, Ready); it returns those Nodes.
func nodesReport(ctx context.Context, kube kubernetes.Interface, nodes []Node, ready bool) ([]corev1.Node, error) {
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}

	byName := map[string]corev1.Node{}
	for _, n := range list.Items {
		byName[n.Name] = n
	}

	var (
		out      []corev1.Node
		problems []string
	)

	for _, want := range nodes {
		n, ok := byName[want.Name]
		if !ok {
			problems = append(problems, want.Name+" ("+want.Address+") has no Node")

			continue
		}

		if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool {
			return a.Type == corev1.NodeInternalIP && a.Address == want.Address
		}) {
			problems = append(problems, fmt.Sprintf("Node %s does not report the internal IP %s", want.Name, want.Address))
		}

		if ready && !nodeIsReady(n) {
			problems = append(problems, "Node "+want.Name+" is not Ready")
		}

		out = append(out, n)
	}

	if len(problems) > 0 {
		return out, fmt.Errorf("%s", strings.Join(problems, "; "))
	}

	return out, nil
}

func nodeIsReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}

	return false
}
