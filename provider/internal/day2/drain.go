package day2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/retry"
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

	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	h := &drain.Helper{
		Ctx: dctx, Client: kube, Force: true, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		GracePeriodSeconds: -1, Timeout: timeout, Out: io.Discard, ErrOut: io.Discard,
	}

	err := evictAll(dctx, h, name, progress)
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

// evictAll is kubectl's drain (drain.RunNodeDrain: the same pod filters, the eviction API, an
// eviction a PodDisruptionBudget refuses asked again) with one difference: it checks every
// 100 ms that the pods are gone where kubectl looks once a second, which on a rolling upgrade
// cost a second per node. ctx and h.Timeout bound it.
func evictAll(ctx context.Context, h *drain.Helper, node string, progress Progress) error {
	list, errs := h.GetPodsForDeletion(node)
	if errs != nil {
		return utilerrors.NewAggregate(errs)
	}

	if w := list.Warnings(); w != "" {
		progress.say("draining %s: %s", node, w)
	}

	pods := list.Pods()
	if len(pods) == 0 {
		return nil
	}

	gv, err := drain.CheckEvictionSupport(h.Client)
	if err != nil {
		return fmt.Errorf("checking for the eviction API: %w", err)
	}

	evictErrs := make([]error, len(pods))

	var wg sync.WaitGroup

	for i, pod := range pods {
		progress.say("draining %s: evicting %s/%s", node, pod.Namespace, pod.Name)
		wg.Go(func() { evictErrs[i] = evict(ctx, h, pod, gv) })
	}

	wg.Wait()

	if err := errors.Join(evictErrs...); err != nil {
		return err
	}

	return pollEvery(ctx, 100*time.Millisecond, h.Timeout, "the pods to leave "+node, progress, func(ctx context.Context) error {
		var left []corev1.Pod

		for _, pod := range pods {
			p, err := h.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})

			switch {
			case apierrors.IsNotFound(err) || (err == nil && p.UID != pod.UID):
			case err != nil:
				return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
			default:
				left = append(left, pod)
			}
		}

		if pods = left; len(pods) > 0 {
			return fmt.Errorf("%d pods still terminating, e.g. %s/%s", len(pods), pods[0].Namespace, pods[0].Name)
		}

		return nil
	})
}

// evict asks the eviction API (or deletes, where a cluster has none) until it accepts. A
// PodDisruptionBudget's refusal (429) is asked again every second, as kubectl drain does.
func evict(ctx context.Context, h *drain.Helper, pod corev1.Pod, gv schema.GroupVersion) error {
	err := retry.Do(ctx, retry.Every(time.Second), func(context.Context) error {
		var err error
		if gv.Empty() {
			err = h.DeletePod(pod)
		} else {
			err = h.EvictPod(pod, gv)
		}

		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case apierrors.IsTooManyRequests(err):
			return err
		default:
			return retry.Permanent(err)
		}
	})
	if err != nil {
		return fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}

	return nil
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
