// Package kubeletemu is an emulated kubelet for the lab: no containers run, but the node's API
// objects behave as a kubelet makes them behave, through client-go only. It registers its Node
// (labels, taints, capacity, nodeInfo with the kubelet version; a rebooted node re-registers the
// same object), renews its Lease in kube-node-lease and posts its status (both stop on Stop, so
// that the real node lifecycle controller marks the node NotReady, as with a machine that powers
// off), publishes mirror pods of its static pods, runs the pods bound to it (Running and Ready;
// except host-network pods, only once the node's network is ready) and finishes pods being
// deleted, as a kubelet does once their containers stopped.
//
// The network becomes ready, as with a real CNI, once a pod on the node that mounts a hostPath at
// or under /etc/cni/net.d runs (what Cilium's and Flannel's DaemonSets do to install the CNI
// configuration); until then the Node is NotReady with the kubelet's own message.
//
// It watches only its own Node and the pods bound to it (field selectors, also applied on the
// client side), and in steady state writes its Lease once per heartbeat and its Node status every
// few heartbeats, so that many nodes can run against one API server.
package kubeletemu

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// DefaultHeartbeatInterval is the lab's heartbeat: the Lease is renewed this often (a real
// kubelet renews every 10 s) and the Node status is posted every few heartbeats.
const DefaultHeartbeatInterval = 2 * time.Second

// statusEvery is how many heartbeats at most pass between two Node status posts when nothing
// changed (a change is posted at the next heartbeat, a network that became ready at once).
const statusEvery = 3

// StaticPod is a pod the kubelet runs from a manifest on disk (Talos writes the control plane's);
// it shows in the API as a mirror pod named <Name>-<node> in kube-system.
type StaticPod struct {
	// Name is the static pod's name, e.g. "kube-apiserver".
	Name string
	// Image is its container's image; a different image (an upgrade) replaces the mirror pod.
	Image string
	// Labels are the pod's labels, e.g. k8s-app=kube-apiserver and tier=control-plane.
	Labels map[string]string
	// Annotations are the pod's annotations (Talos puts talos.dev/config-version on its static
	// pods); a change replaces the mirror pod, as a changed manifest does.
	Annotations map[string]string
}

// Options describe one node's kubelet.
type Options struct {
	// Client is the kubelet's connection to the API server (required).
	Client kubernetes.Interface
	// NodeName is the Node's name, the machine's hostname (required).
	NodeName string
	// InternalIP is the node's address (required): the Node's InternalIP, the host IP of its pods
	// and the pod IP of its host-network pods.
	InternalIP string
	// KubeletVersion is reported in nodeInfo.kubeletVersion, e.g. "v1.34.1".
	KubeletVersion string
	// OSImage is reported in nodeInfo.osImage, e.g. "Talos (v1.11.5)".
	OSImage string
	// KernelVersion is reported in nodeInfo.kernelVersion (default "6.12.57-talos").
	KernelVersion string
	// ContainerRuntimeVersion is reported in nodeInfo.containerRuntimeVersion (default
	// "containerd://2.1.4").
	ContainerRuntimeVersion string
	// ControlPlane labels the node node-role.kubernetes.io/control-plane and taints it NoSchedule
	// unless AllowSchedulingOnControlPlanes.
	ControlPlane bool
	// AllowSchedulingOnControlPlanes leaves the control-plane taint off (and removes it from a
	// re-registering Node).
	AllowSchedulingOnControlPlanes bool
	// Labels are added to the kubelet's own labels (hostname, os, arch, role).
	Labels map[string]string
	// Taints are added to the Node when missing.
	Taints []corev1.Taint
	// Capacity overrides the node's default capacity (2 CPUs, 4Gi memory, 110 pods, 20Gi
	// ephemeral storage) resource by resource; allocatable is capacity minus Talos' system
	// reservation.
	Capacity corev1.ResourceList
	// StaticPods are published as mirror pods.
	StaticPods []StaticPod
	// NetworkReady, when set, replaces the built-in rule (a running pod that mounts a hostPath at
	// or under /etc/cni/net.d) in deciding whether the node's network is ready; it is asked at
	// every heartbeat.
	NetworkReady func() bool
	// CNIConfigured makes the network ready from the start (a CNI the node has built in).
	CNIConfigured bool
	// HeartbeatInterval is how often the Lease is renewed (default DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
	// HungPod, when it returns true for a pod being deleted, keeps that pod terminating (it is
	// asked again every second).
	HungPod func(*corev1.Pod) bool
	// Logf receives the kubelet's log lines (none by default).
	Logf func(format string, args ...any)
}

// Kubelet is a running emulated kubelet.
type Kubelet struct {
	opts   Options
	bootID string

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	stopOnce  sync.Once
	factories []informers.SharedInformerFactory
	pods      cache.SharedIndexInformer
	nodes     cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[string]
	kick      chan struct{} // asks the heartbeat loop for a status post now

	// Used by one goroutine at a time: Start, then the heartbeat loop.
	nodeUID types.UID
	lease   *coordinationv1.Lease

	mu           sync.Mutex
	stopped      bool
	networkReady bool // the built-in rule's latch
	lastNetwork  bool // the network state of the last status post
	track        podState
	lastErr      map[string]string
}

// Start registers the node (creating its Node, or taking over the existing one as a rebooted
// node does), publishes its status, Lease and mirror pods, and runs the kubelet until ctx ends or
// Stop is called.
func Start(ctx context.Context, opts Options) (*Kubelet, error) {
	if opts.Client == nil || opts.NodeName == "" || opts.InternalIP == "" {
		return nil, fmt.Errorf("kubeletemu: Client, NodeName and InternalIP are required")
	}

	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}

	if opts.KernelVersion == "" {
		opts.KernelVersion = "6.12.57-talos"
	}

	if opts.ContainerRuntimeVersion == "" {
		opts.ContainerRuntimeVersion = "containerd://2.1.4"
	}

	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}

	ctx, cancel := context.WithCancel(ctx)
	k := &Kubelet{
		opts: opts, bootID: string(uuid.NewUUID()), cancel: cancel,
		networkReady: opts.CNIConfigured, kick: make(chan struct{}, 1),
		track: newPodState(), lastErr: map[string]string{},
	}

	if err := k.start(ctx); err != nil {
		k.Stop()

		return nil, fmt.Errorf("kubeletemu %s: %w", opts.NodeName, err)
	}

	opts.Logf("kubeletemu %s: registered", opts.NodeName)

	return k, nil
}

// start registers, then runs the loops.
func (k *Kubelet) start(ctx context.Context) error {
	regCtx, regCancel := context.WithTimeout(ctx, 30*time.Second)
	defer regCancel()

	if err := k.register(regCtx); err != nil {
		return fmt.Errorf("registering the node: %w", err)
	}

	if err := k.renewLease(regCtx); err != nil {
		return fmt.Errorf("creating the node lease: %w", err)
	}

	k.startInformers(ctx)

	if !cache.WaitForCacheSync(regCtx.Done(), k.pods.HasSynced, k.nodes.HasSynced) {
		return fmt.Errorf("watching the node and its pods: %w", context.Cause(regCtx))
	}

	// A CNI pod already running (a kubelet restart) makes the network ready before the status
	// is posted again.
	for _, obj := range k.pods.GetStore().List() {
		if pod, ok := obj.(*corev1.Pod); ok && k.ours(pod) && runningAndReady(pod) && mountsCNIDir(pod) {
			k.noteCNI(pod)
		}
	}

	if err := k.syncStatus(regCtx, true); err != nil {
		return fmt.Errorf("posting the node status: %w", err)
	}

	if err := k.syncMirrorPods(regCtx); err != nil {
		return fmt.Errorf("mirror pods: %w", err)
	}

	k.wg.Add(3)

	go func() {
		defer k.wg.Done()
		k.heartbeatLoop(ctx)
	}()

	go func() {
		defer k.wg.Done()

		for k.processNext(ctx) {
		}
	}()

	go func() {
		defer k.wg.Done()
		<-ctx.Done()
		k.queue.ShutDown()
	}()

	return nil
}

// Stop stops the kubelet as a powered-off machine stops: its loops end and nothing is said to
// the API server (the node lifecycle controller notices the Lease is no longer renewed). It may
// be called more than once.
func (k *Kubelet) Stop() {
	k.stopOnce.Do(func() {
		k.cancel()

		if k.queue != nil {
			k.queue.ShutDown()
		}

		k.wg.Wait()

		for _, f := range k.factories {
			f.Shutdown()
		}

		k.mu.Lock()
		k.stopped = true
		k.mu.Unlock()
	})
}

// NetworkReady reports whether the node's network (its CNI) is ready.
func (k *Kubelet) NetworkReady() bool {
	if k.opts.NetworkReady != nil {
		return k.opts.NetworkReady()
	}

	k.mu.Lock()
	defer k.mu.Unlock()

	return k.networkReady
}

// Ready reports whether the kubelet runs and reports its node Ready (its network is ready).
func (k *Kubelet) Ready() bool {
	k.mu.Lock()
	stopped := k.stopped
	k.mu.Unlock()

	return !stopped && k.NetworkReady()
}

// heartbeatLoop renews the Lease every heartbeat and posts the Node status when it changed, or
// every statusEvery heartbeats.
func (k *Kubelet) heartbeatLoop(ctx context.Context) {
	tick := time.NewTicker(k.opts.HeartbeatInterval)
	defer tick.Stop()

	for beats := 1; ; beats++ {
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
			k.logErr(ctx, "node status", k.syncStatus(ctx, true))
		case <-tick.C:
			k.logErr(ctx, "lease", k.renewLease(ctx))
			k.logErr(ctx, "node status", k.syncStatus(ctx, beats%statusEvery == 0))

			// A deleted mirror pod comes back, as the kubelet recreates it from its manifest
			// (usually at once, on the deletion event; this is the safety net).
			if beats%(2*statusEvery) == 0 && len(k.opts.StaticPods) > 0 {
				k.queue.Add(mirrorKey)
			}
		}
	}
}

// kickStatus asks for a status post at once.
func (k *Kubelet) kickStatus() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// logErr logs err unless it is nil, the kubelet is stopping, or it repeats the last error of
// the same kind.
func (k *Kubelet) logErr(ctx context.Context, what string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()

	if err == nil || ctx.Err() != nil {
		delete(k.lastErr, what)

		return
	}

	if k.lastErr[what] == err.Error() {
		return
	}

	k.lastErr[what] = err.Error()
	k.opts.Logf("kubeletemu %s: %s: %v", k.opts.NodeName, what, err)
}
