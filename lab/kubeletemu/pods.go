package kubeletemu

import (
	"context"
	"fmt"
	"net/netip"
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
	"k8s.io/utils/ptr"
)

// cniDir is where CNI plugins' DaemonSets write the node's CNI configuration.
const cniDir = "/etc/cni/net.d"

// watchPods runs the pods bound to this node until ctx ends.
func (k *Kubelet) watchPods(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(k.opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.opts.NodeName).String()
		}))
	inf := factory.Core().V1().Pods().Informer()

	queue := make(chan *corev1.Pod, 1024)
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == k.opts.NodeName {
			select {
			case queue <- pod:
			default: // full: the periodic resync catches up
			}
		}
	}

	k.mu.Lock()
	k.requeue = func(p *corev1.Pod) { enqueue(p) }
	k.mu.Unlock()

	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: k.podGone,
	})

	factory.Start(ctx.Done())
	defer factory.Shutdown()

	resync := time.NewTicker(time.Second)
	defer resync.Stop()

	for {
		select {
		case <-ctx.Done():
			return
		case pod := <-queue:
			k.handle(ctx, pod)
		case <-resync.C:
			// pods that waited for the network, and deletions that may have been missed
			present := map[types.UID]bool{}

			for _, obj := range inf.GetStore().List() {
				if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == k.opts.NodeName {
					present[pod.UID] = true
					k.handle(ctx, pod)
				}
			}

			k.stopContainers("", present)
		}
	}
}

// handle moves one pod along: finish it if it is being deleted, run it if it can run.
func (k *Kubelet) handle(ctx context.Context, pod *corev1.Pod) {
	switch {
	case pod.DeletionTimestamp != nil:
		k.finish(ctx, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		k.stopContainers(pod.UID, nil)
	case pod.Status.Phase == corev1.PodRunning && podReady(pod):
		if mountsCNIDir(pod) {
			k.setNetworkReady(ctx)
		}

		k.startContainers(ctx, pod)
	case pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending || pod.Status.Phase == corev1.PodRunning:
		// Pending pods start; a running pod someone marked not ready (the node lifecycle controller
		// does while the node is NotReady) gets its true status back, as the status manager does.
		if pod.Spec.HostNetwork || k.NetworkReady() {
			if err := k.markRunning(ctx, pod); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				k.opts.Logf("kubeletemu %s: running %s/%s: %v", k.opts.NodeName, pod.Namespace, pod.Name, err)
			}
		}
	}
}

func (k *Kubelet) setNetworkReady(ctx context.Context) {
	k.mu.Lock()
	was := k.networkReady
	k.networkReady = true
	k.mu.Unlock()

	if !was {
		k.opts.Logf("kubeletemu %s: CNI configured; the network is ready", k.opts.NodeName)
		_ = k.heartbeat(ctx)
	}
}

// finish deletes a terminating pod for good once its containers "stopped", as the kubelet does.
func (k *Kubelet) finish(ctx context.Context, pod *corev1.Pod) {
	// Its containers are told to stop at once (SIGTERM), even those of a pod that hangs.
	stopped := k.stopContainers(pod.UID, nil)

	if k.opts.HungPod != nil && k.opts.HungPod(pod) {
		return
	}

	for _, done := range stopped {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}

	grace := 200 * time.Millisecond
	if s := pod.DeletionGracePeriodSeconds; s != nil && time.Duration(*s)*time.Second < grace {
		grace = time.Duration(*s) * time.Second
	}

	// Its containers stop grace after the deletion began: come back then (the resync is a
	// second's granularity, which would make every eviction take up to 1.2 s).
	if left := grace - time.Since(pod.DeletionTimestamp.Add(-time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 0))*time.Second)); left > 0 {
		k.mu.Lock()
		requeue := k.requeue
		k.mu.Unlock()

		if requeue != nil {
			time.AfterFunc(left, func() { requeue(pod) })
		}

		return
	}

	err := k.opts.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		k.opts.Logf("kubeletemu %s: finishing %s/%s: %v", k.opts.NodeName, pod.Namespace, pod.Name, err)
	}
}

// markRunning reports the pod's containers started and ready.
func (k *Kubelet) markRunning(ctx context.Context, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	now := metav1.Now()

	hostIPs := make([]corev1.HostIP, 0, len(k.opts.InternalIPs))
	for _, ip := range k.opts.InternalIPs {
		hostIPs = append(hostIPs, corev1.HostIP{IP: ip})
	}

	ips := k.opts.InternalIPs
	if !pod.Spec.HostNetwork {
		ips = k.podIP(string(pod.UID))
	}

	podIPs := make([]corev1.PodIP, 0, len(ips))
	for _, ip := range ips {
		podIPs = append(podIPs, corev1.PodIP{IP: ip})
	}

	pod.Status.Phase = corev1.PodRunning
	pod.Status.HostIPs, pod.Status.PodIPs = hostIPs, podIPs
	pod.Status.HostIP, pod.Status.PodIP = "", ""

	if len(hostIPs) > 0 {
		pod.Status.HostIP = hostIPs[0].IP
	}

	if len(podIPs) > 0 {
		pod.Status.PodIP = podIPs[0].IP
	}

	pod.Status.StartTime = &now
	pod.Status.Conditions = nil

	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}

	pod.Status.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), Ready: true, ContainerID: containerID(pod, c.Name),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}

	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), Ready: true, Started: ptr.To(true), ContainerID: containerID(pod, c.Name),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}

	_, err := k.opts.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})

	return err
}

// podIP is a pod's IPs: one per pod CIDR of the Node (the host-local IPAM of a CNI), in their
// order; before the controller-manager allocated any, one from 10.244.<host>.0/24.
func (k *Kubelet) podIP(uid string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()

	if ips, ok := k.podIPs[uid]; ok {
		return ips
	}

	k.nextIP++

	var ips []string

	for _, cidr := range k.podCIDRs {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			continue
		}

		a := p.Masked().Addr()
		for range k.nextIP%250 + 2 {
			a = a.Next()
		}

		if p.Contains(a) {
			ips = append(ips, a.String())
		}
	}

	if len(ips) == 0 {
		ips = []string{fmt.Sprintf("10.244.%d.%d", hostOctet(k.primaryIP()), k.nextIP%250+2)}
	}

	k.podIPs[uid] = ips

	return ips
}

// primaryIP is the node's first address ("" if none).
func (k *Kubelet) primaryIP() string {
	if len(k.opts.InternalIPs) == 0 {
		return ""
	}

	return k.opts.InternalIPs[0]
}

func hostOctet(ip string) int {
	var a, b, c, d int
	if _, err := fmt.Sscanf(ip, "%d.%d.%d.%d", &a, &b, &c, &d); err != nil {
		return 0
	}

	return d
}

func imageID(image string) string { return image + "@sha256:" + strings.Repeat("0", 64) }

func containerID(pod *corev1.Pod, name string) string {
	return "containerd://" + strings.ReplaceAll(string(pod.UID), "-", "") + "-" + name
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}

	return false
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
