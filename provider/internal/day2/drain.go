package day2

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"
)

// Cordon marks the node unschedulable (or schedulable again with on false).
func Cordon(ctx context.Context, kube kubernetes.Interface, name string, on bool) error {
	node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes node %s: %w", name, err)
	}

	h := &drain.Helper{Ctx: ctx, Client: kube, Out: io.Discard, ErrOut: io.Discard}
	if err := drain.RunCordonOrUncordon(h, node, on); err != nil {
		verb := "cordoning"
		if !on {
			verb = "uncordoning"
		}

		return fmt.Errorf("%s node %s: %w", verb, name, err)
	}

	return nil
}

// Drain cordons the node and evicts its pods through the eviction API, respecting
// PodDisruptionBudgets, as `kubectl drain --ignore-daemonsets --delete-emptydir-data` does. Pods
// still on the node after timeout are named in the error.
func Drain(ctx context.Context, kube kubernetes.Interface, name string, timeout time.Duration, progress Progress) error {
	if err := Cordon(ctx, kube, name, true); err != nil {
		return err
	}

	var log strings.Builder

	h := &drain.Helper{
		Ctx: ctx, Client: kube, Force: true, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		GracePeriodSeconds: -1, Timeout: timeout, Out: &log, ErrOut: &log,
		OnPodDeletionOrEvictionStarted: func(pod *corev1.Pod, usingEviction bool) {
			progress.say("draining %s: evicting %s/%s", name, pod.Namespace, pod.Name)
		},
	}

	err := drain.RunNodeDrain(h, name)
	if err == nil {
		return nil
	}

	left, lerr := evictablePods(ctx, kube, name)
	if lerr != nil || len(left) == 0 {
		return fmt.Errorf("draining node %s: %w", name, err)
	}

	return fmt.Errorf("draining node %s: %w; still on the node after %s: %s (check its PodDisruptionBudget or termination)",
		name, err, timeout, strings.Join(left, ", "))
}

// evictablePods lists the pods a drain has to move off the node: not mirror pods, not
// DaemonSet pods, not finished.
func evictablePods(ctx context.Context, kube kubernetes.Interface, node string) ([]string, error) {
	list, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}

	var names []string

	for _, p := range list.Items {
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}

		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "DaemonSet" {
			continue
		}

		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}

		names = append(names, p.Namespace+"/"+p.Name)
	}

	return names, nil
}
