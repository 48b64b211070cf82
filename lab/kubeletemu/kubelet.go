// Package kubeletemu is an emulated kubelet for the lab: no containers run, but the node's API
// objects behave as a kubelet makes them behave, through client-go only. It registers its Node
// (labels, taints, capacity, nodeInfo with the kubelet version), renews its Lease and status
// (stopping on Stop, so the real node-lifecycle controller marks the node NotReady), publishes
// mirror pods of the control-plane static pods, runs the pods bound to it (Running and Ready; other
// than host-network pods only once the node's network is ready) and finishes pods being deleted.
// No container runs, but Options.Containers can stand in for the processes of chosen images while
// their pods run (controllers whose work the cluster needs).
//
// The network becomes ready, as with a real CNI, once a pod on the node that mounts a hostPath
// under /etc/cni/net.d runs (what Cilium's and Flannel's DaemonSets do to install the CNI
// configuration); until then the Node is NotReady with the kubelet's own message.
//
// With an external cloud provider (Options.ExternalCloudProvider, Options.ProviderID) it registers
// as such a kubelet does: the providerID, the uninitialized taint, the provided-node-ip
// annotation; only a cloud controller manager removes the taint (none runs unless a pod of one
// runs with an Options.Containers stand-in for its image).
package kubeletemu

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
)

// StaticPod is a control-plane static pod the kubelet runs from a manifest on disk; it shows in
// the API as a mirror pod.
type StaticPod struct {
	Name   string
	Image  string
	Labels map[string]string
}

// Options describe one node's kubelet.
type Options struct {
	Client   kubernetes.Interface
	NodeName string
	// InternalIPs are the node's addresses (the kubelet's --node-ip), one per family, the
	// primary first: the Node's InternalIP addresses and its pods' host IPs, in this order.
	InternalIPs []string
	// InternalIP is InternalIPs of a single-stack node (used when InternalIPs is empty).
	InternalIP     string
	KubeletVersion string // e.g. v1.34.1
	OSImage        string // e.g. "Talos (v1.11.5)"
	// BootID is the node's boot id (/proc/sys/kernel/random/boot_id), reported in the Node's
	// status as a real kubelet does: it changes at every reboot. Default: the node name.
	BootID string
	// SystemUUID is the machine's SMBIOS system UUID (/sys/class/dmi/id/product_uuid; on Proxmox
	// the VM's smbios1 uuid), reported as the Node's systemUUID, which a cloud controller manager
	// matches against the VM. Default: the node name.
	SystemUUID string
	// ControlPlane labels the node node-role.kubernetes.io/control-plane and taints it NoSchedule
	// unless AllowSchedulingOnControlPlanes.
	ControlPlane                   bool
	AllowSchedulingOnControlPlanes bool
	Labels                         map[string]string
	// Taints, when set, are the taints the Node is registered with instead (the kubelet's
	// registerWithTaints, which Talos fills from the configuration's taints).
	Taints []corev1.Taint
	// ProviderID is the kubelet's --provider-id (providerID of its configuration file), e.g.
	// "proxmox://lab/104": the Node's spec.providerID when the kubelet creates the Node. A kubelet
	// never changes it on an existing Node (the API server refuses to change a set providerID).
	ProviderID string
	// ExternalCloudProvider is --cloud-provider=external: the kubelet registers the Node with the
	// taint node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule, which only a cloud
	// controller manager removes (see Containers), annotates it with its node IPs
	// (alpha.kubernetes.io/provided-node-ip) and leaves the Node's addresses, once set, to the
	// cloud controller manager.
	ExternalCloudProvider bool
	StaticPods            []StaticPod
	// CNIConfigured makes the network ready from the start (a CNI built into the node).
	CNIConfigured bool
	// HeartbeatInterval is how often the Lease and the status are renewed (default 2s).
	HeartbeatInterval time.Duration
	// HungPod, when it returns true for a pod being deleted, keeps it terminating forever.
	HungPod func(*corev1.Pod) bool
	// Containers are the lab's stand-ins for containers' processes, by image repository (the
	// image without tag and digest, see ImageRepository): while a pod bound to the node runs (the
	// kubelet marked it Running, or found it running when it started), each of its containers
	// whose image has one runs it, until the pod is being deleted, finishes or is gone, or the
	// kubelet stops.
	Containers map[string]ContainerFunc
	// OnStatus, when set, is told after every status the API server accepted whether it said
	// Ready (the Node's condition keeps its transition time to the second only).
	OnStatus func(ready bool)
	Logf     func(format string, args ...any)
}

// Kubelet is a running emulated kubelet.
type Kubelet struct {
	opts   Options
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu           sync.Mutex
	networkReady bool
	podIPs       map[string][]string // pod UID → IPs, one per pod CIDR
	nextIP       int
	podCIDRs     []string // the Node's spec.podCIDRs, once the controller-manager allocated them
	// requeue hands a pod back to the pod loop (set by watchPods).
	requeue func(*corev1.Pod)
	// containers are the running Options.Containers, by pod UID and container name.
	containers   map[string]*runningContainer
	containersWG sync.WaitGroup
}

// Start registers the node and runs the kubelet until ctx ends or Stop is called.
func Start(ctx context.Context, opts Options) (*Kubelet, error) {
	if opts.Client == nil || opts.NodeName == "" {
		return nil, fmt.Errorf("kubeletemu: Client and NodeName are required")
	}

	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 2 * time.Second
	}

	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}

	if len(opts.InternalIPs) == 0 && opts.InternalIP != "" {
		opts.InternalIPs = []string{opts.InternalIP}
	}

	ctx, cancel := context.WithCancel(ctx)
	k := &Kubelet{opts: opts, cancel: cancel, done: make(chan struct{}), networkReady: opts.CNIConfigured, podIPs: map[string][]string{},
		containers: map[string]*runningContainer{}}

	regCtx, regCancel := context.WithTimeout(ctx, 30*time.Second)
	defer regCancel()

	if err := k.register(regCtx); err != nil {
		cancel()

		return nil, fmt.Errorf("kubeletemu %s: registering the node: %w", opts.NodeName, err)
	}

	go k.run(ctx)

	opts.Logf("kubeletemu %s: registered", opts.NodeName)

	return k, nil
}

// Stop stops the kubelet as a powered-off machine does: nothing is said to the API server.
func (k *Kubelet) Stop() {
	k.once.Do(func() {
		k.cancel()
		<-k.done
	})
}

// NetworkReady reports whether the node's CNI is configured.
func (k *Kubelet) NetworkReady() bool {
	k.mu.Lock()
	defer k.mu.Unlock()

	return k.networkReady
}

func (k *Kubelet) run(ctx context.Context) {
	defer close(k.done)

	tick := time.NewTicker(k.opts.HeartbeatInterval)
	defer tick.Stop()

	beats := 0

	podsDone := make(chan struct{})

	go func() {
		defer close(podsDone)
		k.watchPods(ctx)
	}()

	// A starting kubelet posts its status at once (a node back from a reboot reports its new boot
	// id without waiting for the first heartbeat).
	if err := k.heartbeat(ctx); err != nil && ctx.Err() == nil {
		k.opts.Logf("kubeletemu %s: first status: %v", k.opts.NodeName, err)
	}

	for {
		select {
		case <-ctx.Done():
			<-podsDone
			k.containersWG.Wait()

			return
		case <-tick.C:
			if err := k.heartbeat(ctx); err != nil && ctx.Err() == nil {
				k.opts.Logf("kubeletemu %s: heartbeat: %v", k.opts.NodeName, err)
			}

			// A deleted mirror pod comes back, as the kubelet recreates it from its manifest.
			if beats++; beats%5 == 0 {
				if err := k.syncMirrorPods(ctx); err != nil && ctx.Err() == nil {
					k.opts.Logf("kubeletemu %s: mirror pods: %v", k.opts.NodeName, err)
				}
			}
		}
	}
}

func capacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("2"),
		corev1.ResourceMemory:           resource.MustParse("4Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
}
