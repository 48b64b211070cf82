package day2

import (
	"context"
	"fmt"
	"slices"
	"strings"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// EtcdView is what the etcd gate saw.
type EtcdView struct {
	// Leader is the name of the member that leads.
	Leader string
}

// EtcdHealthy checks etcd through the Talos API of every control plane: the member list holds
// exactly the control planes, all started voting members, and each member answers EtcdStatus
// with a leader and no errors. It is read-only.
func EtcdHealthy(ctx context.Context, a Access, cps []Node) (EtcdView, error) {
	var view EtcdView

	if len(cps) == 0 {
		return view, fmt.Errorf("the cluster has no control plane")
	}

	names := make([]string, 0, len(cps))
	for _, n := range cps {
		names = append(names, n.Name)
	}

	var (
		members []*machineapi.EtcdMember
		ids     = map[uint64]string{}
	)

	for i, n := range cps {
		c, err := a.Talos(ctx, n.Address)
		if err != nil {
			return view, err
		}

		if i == 0 {
			list, err := c.EtcdMemberList(ctx, &machineapi.EtcdMemberListRequest{})
			if err != nil {
				c.Close() //nolint:errcheck

				return view, fmt.Errorf("etcd member list from %s: %w", n.Name, err)
			}

			for _, m := range list.GetMessages() {
				members = m.GetMembers()
			}
		}

		st, err := c.EtcdStatus(ctx)
		c.Close() //nolint:errcheck

		if err != nil {
			return view, fmt.Errorf("etcd member %s: %w", n.Name, err)
		}

		for _, m := range st.GetMessages() {
			ms := m.GetMemberStatus()
			if errs := ms.GetErrors(); len(errs) > 0 {
				return view, fmt.Errorf("etcd member %s reports: %s", n.Name, strings.Join(errs, "; "))
			}

			if ms.GetLeader() == 0 {
				return view, fmt.Errorf("etcd member %s has no leader", n.Name)
			}

			ids[ms.GetMemberId()] = n.Name

			if ms.GetLeader() == ms.GetMemberId() {
				view.Leader = n.Name
			}
		}
	}

	var listed []string

	for _, m := range members {
		switch {
		case m.GetHostname() == "":
			return view, fmt.Errorf("etcd member %016x has not started", m.GetId())
		case m.GetIsLearner():
			return view, fmt.Errorf("etcd member %s is still a learner", m.GetHostname())
		}

		listed = append(listed, m.GetHostname())
	}

	slices.Sort(listed)
	slices.Sort(names)

	if !slices.Equal(listed, names) {
		return view, fmt.Errorf("etcd members are %v, the control planes are %v", listed, names)
	}

	return view, nil
}

// NodeReady checks that the Kubernetes Node is Ready; with unschedulable false it also checks
// that it is not cordoned.
func NodeReady(ctx context.Context, kube kubernetes.Interface, name string) (*corev1.Node, error) {
	node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes node %s: %w", name, err)
	}

	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return node, nil
			}

			return node, fmt.Errorf("kubernetes node %s is not Ready: %s", name, strings.TrimSpace(c.Reason+" "+c.Message))
		}
	}

	return node, fmt.Errorf("kubernetes node %s reports no Ready condition yet", name)
}

// controlPlanePods are the static pods every control plane runs.
var controlPlanePods = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// StaticPodsRunning checks that the control plane's static pods run on the node (their mirror
// pods in kube-system are Running and Ready).
func StaticPodsRunning(ctx context.Context, kube kubernetes.Interface, node string) error {
	for _, name := range controlPlanePods {
		pod, err := kube.CoreV1().Pods("kube-system").Get(ctx, name+"-"+node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("static pod %s on %s: %w", name, node, err)
		}

		if pod.Status.Phase != corev1.PodRunning || !podReady(pod) {
			return fmt.Errorf("static pod %s on %s is %s, not running and ready", name, node, pod.Status.Phase)
		}
	}

	return nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}

	return false
}
