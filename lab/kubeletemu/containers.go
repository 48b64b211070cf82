package kubeletemu

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ContainerFunc does what a container's process does while its pod runs on the node: the lab's
// stand-in for an image whose work matters to the cluster (a controller), since no container
// runs. It runs until ctx ends: when the pod is being deleted, has finished or is gone, or when
// the kubelet stops (the node went down). It is given the kubelet's API client, the pod as it was
// when the container started and the container's spec. One that returns before is not started
// again while the pod runs.
type ContainerFunc func(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, container corev1.Container)

// runningContainer is a ContainerFunc running for one container of a pod.
type runningContainer struct {
	image  string
	cancel context.CancelFunc
	done   chan struct{}
}

// ImageRepository is an image reference without its tag and digest:
// "ghcr.io/org/app:v1@sha256:…" → "ghcr.io/org/app".
func ImageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}

	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}

	return image
}

func containerKey(uid types.UID, name string) string { return string(uid) + "/" + name }

// startContainers starts the ContainerFuncs of a running pod's containers whose image
// repository has one, unless they run already; one whose container's image changed restarts.
func (k *Kubelet) startContainers(ctx context.Context, pod *corev1.Pod) {
	if len(k.opts.Containers) == 0 || ctx.Err() != nil {
		return
	}

	k.mu.Lock()
	defer k.mu.Unlock()

	for _, c := range pod.Spec.Containers {
		key := containerKey(pod.UID, c.Name)
		if rc := k.containers[key]; rc != nil {
			if rc.image == c.Image {
				continue
			}

			rc.cancel()
			delete(k.containers, key)
		}

		fn := k.opts.Containers[ImageRepository(c.Image)]
		if fn == nil {
			continue
		}

		cctx, cancel := context.WithCancel(ctx)
		rc := &runningContainer{image: c.Image, cancel: cancel, done: make(chan struct{})}
		k.containers[key] = rc
		k.opts.Logf("kubeletemu %s: starting container %s of %s/%s (%s)", k.opts.NodeName, c.Name, pod.Namespace, pod.Name, c.Image)

		k.containersWG.Add(1)

		go func(pod *corev1.Pod, c corev1.Container) {
			defer k.containersWG.Done()
			defer close(rc.done)

			fn(cctx, k.opts.Client, pod, c)
		}(pod.DeepCopy(), *c.DeepCopy())
	}
}

// stopContainers stops the ContainerFuncs of a pod's containers (all pods' but those in keep when
// uid is ""): they are told to stop; the returned channels close once they have returned.
func (k *Kubelet) stopContainers(uid types.UID, keep map[types.UID]bool) []<-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()

	var done []<-chan struct{}

	for key, rc := range k.containers {
		podUID := types.UID(key[:strings.LastIndex(key, "/")])
		if (uid != "" && podUID != uid) || (uid == "" && keep[podUID]) {
			continue
		}

		rc.cancel()
		delete(k.containers, key)
		done = append(done, rc.done)
	}

	return done
}

// podGone is an informer's delete handler: the containers of a pod that is gone stop.
func (k *Kubelet) podGone(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}

	if pod, ok := obj.(*corev1.Pod); ok {
		k.stopContainers(pod.UID, nil)
	}
}
