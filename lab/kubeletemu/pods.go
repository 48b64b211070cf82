package kubeletemu

import (
	"context"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

const (
	// cniDir is where CNI plugins' DaemonSets write the node's CNI configuration.
	cniDir = "/etc/cni/net.d"
	// mirrorKey is the work queue's key for a sync of the mirror pods (pod keys are ns/name).
	mirrorKey = "#mirror-pods"
	// maxTerminationDelay bounds how long a deleted pod's containers take to stop.
	maxTerminationDelay = 200 * time.Millisecond
	// hungRecheck is how often a pod HungPod keeps is asked about again.
	hungRecheck = time.Second
)

// podState is what the kubelet remembers of its pods, by UID.
type podState struct {
	ips         map[types.UID]string    // pod IPs handed out
	terminating map[types.UID]time.Time // when the deletion was first seen
	finished    map[types.UID]bool      // deleted for good (finalizers may keep the object)
}

func newPodState() podState {
	return podState{ips: map[types.UID]string{}, terminating: map[types.UID]time.Time{}, finished: map[types.UID]bool{}}
}

// startInformers watches the Node and the pods bound to it (field selectors; the events are
// filtered again on the client side, for API servers and fakes that do not filter watches).
func (k *Kubelet) startInformers(ctx context.Context) {
	k.queue = workqueue.NewTypedRateLimitingQueue(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 5*time.Second))

	podFactory := informers.NewSharedInformerFactoryWithOptions(k.opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.opts.NodeName).String()
		}))
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(k.opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", k.opts.NodeName).String()
		}))

	k.pods = podFactory.Core().V1().Pods().Informer()
	k.nodes = nodeFactory.Core().V1().Nodes().Informer()
	k.factories = []informers.SharedInformerFactory{podFactory, nodeFactory}

	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && k.ours(pod) {
			if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
				k.queue.Add(key)
			}
		}
	}

	_, _ = k.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}

			if pod, ok := obj.(*corev1.Pod); ok && k.ours(pod) {
				k.forget(pod.UID)

				if isMirrorPod(pod) {
					k.queue.Add(mirrorKey) // the kubelet recreates it
				}
			}
		},
	})

	for _, f := range k.factories {
		f.Start(ctx.Done())
	}
}

// ours reports whether pod is bound to this node.
func (k *Kubelet) ours(pod *corev1.Pod) bool { return pod.Spec.NodeName == k.opts.NodeName }

// enqueueAllPods queues every pod of the node for a sync.
func (k *Kubelet) enqueueAllPods() {
	if k.pods == nil {
		return
	}

	for _, obj := range k.pods.GetStore().List() {
		if pod, ok := obj.(*corev1.Pod); ok && k.ours(pod) {
			if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
				k.queue.Add(key)
			}
		}
	}
}

// processNext syncs one queued pod (or the mirror pods); false once the queue shut down.
func (k *Kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)

	var (
		after time.Duration
		err   error
	)

	if key == mirrorKey {
		err = k.syncMirrorPods(ctx)
	} else {
		after, err = k.syncPod(ctx, key)
	}

	switch {
	case err != nil:
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
			k.logErr(ctx, "pod "+key, err)
		}

		k.queue.AddRateLimited(key)
	case after > 0:
		k.queue.Forget(key)
		k.queue.AddAfter(key, after)
	default:
		k.logErr(ctx, "pod "+key, nil)
		k.queue.Forget(key)
	}

	return true
}

// syncPod moves one pod along as a kubelet would: it finishes a pod being deleted, starts a
// pending pod (host-network pods at once, others once the network is ready), and restores the
// status of a running pod someone changed (the node lifecycle controller marks pods not ready
// while their node is NotReady). It returns when to look at the pod again, if it must.
func (k *Kubelet) syncPod(ctx context.Context, key string) (time.Duration, error) {
	obj, exists, err := k.pods.GetStore().GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}

	pod, ok := obj.(*corev1.Pod)
	if !ok || !k.ours(pod) {
		return 0, nil
	}

	switch {
	case pod.DeletionTimestamp != nil:
		return k.terminate(ctx, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return 0, nil
	case !needsRunningStatus(pod):
		if mountsCNIDir(pod) {
			k.noteCNI(pod)
		}

		return 0, nil
	case !pod.Spec.HostNetwork && !k.NetworkReady():
		return 0, k.markPending(ctx, pod)
	}

	running, err := k.markRunning(ctx, pod)
	if err != nil {
		return 0, err
	}

	if mountsCNIDir(running) {
		k.noteCNI(running)
	}

	return 0, nil
}

// terminate finishes a pod being deleted once its containers "stopped" (after min(its grace
// period, 200ms)): it posts the terminal status, then deletes the pod for good with a zero grace
// period and the pod's UID as a precondition, as the kubelet's status manager does. A mirror pod
// is deleted at once (its static pod keeps running; the mirror pod comes back).
func (k *Kubelet) terminate(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	pods := k.opts.Client.CoreV1().Pods(pod.Namespace)
	final := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}}

	k.mu.Lock()
	finished := k.track.finished[pod.UID]
	k.mu.Unlock()

	if finished {
		return 0, nil // waiting for finalizers
	}

	if isMirrorPod(pod) {
		return 0, ignoreGone(pods.Delete(ctx, pod.Name, final))
	}

	if k.opts.HungPod != nil && k.opts.HungPod(pod) {
		return hungRecheck, nil
	}

	delay := maxTerminationDelay
	if s := pod.DeletionGracePeriodSeconds; s != nil {
		delay = min(delay, time.Duration(*s)*time.Second)
	}

	k.mu.Lock()
	seen, ok := k.track.terminating[pod.UID]
	if !ok {
		seen = time.Now()
		k.track.terminating[pod.UID] = seen
	}
	k.mu.Unlock()

	if wait := time.Until(seen.Add(delay)); wait > 0 {
		return wait, nil
	}

	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		if err := k.markTerminated(ctx, pod); err != nil {
			return 0, ignoreGone(err)
		}
	}

	if err := ignoreGone(pods.Delete(ctx, pod.Name, final)); err != nil {
		return 0, err
	}

	k.mu.Lock()
	k.track.finished[pod.UID] = true
	k.mu.Unlock()

	return 0, nil
}

// ignoreGone is err unless it says the pod is gone (not found, or replaced: the UID
// precondition failed).
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || (apierrors.IsConflict(err) && strings.Contains(err.Error(), "UID")) {
		return nil
	}

	return err
}

// forget drops what the kubelet remembers of a deleted pod.
func (k *Kubelet) forget(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()

	delete(k.track.ips, uid)
	delete(k.track.terminating, uid)
	delete(k.track.finished, uid)
}

// noteCNI records that a pod installing the CNI configuration runs: the network is ready (with
// the built-in rule), the Node's status is posted at once and the pods that waited start.
func (k *Kubelet) noteCNI(pod *corev1.Pod) {
	if k.opts.NetworkReady != nil {
		return
	}

	k.mu.Lock()
	was := k.networkReady
	k.networkReady = true
	k.mu.Unlock()

	if !was {
		k.opts.Logf("kubeletemu %s: %s/%s configured the CNI; the network is ready", k.opts.NodeName, pod.Namespace, pod.Name)
		k.kickStatus()
		k.enqueueAllPods()
	}
}

// mountsCNIDir reports whether the pod mounts a hostPath at or under /etc/cni/net.d.
func mountsCNIDir(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}

		p := path.Clean(v.HostPath.Path)
		if p == cniDir || strings.HasPrefix(p, cniDir+"/") {
			return true
		}
	}

	return false
}
