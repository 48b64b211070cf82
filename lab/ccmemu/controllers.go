package ccmemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// ccm is the CCM process once its cloud provider is initialized.
type ccm struct {
	client  kubernetes.Interface
	cfg     config
	flags   flags
	say     func(string, ...any)
	pool    map[string]*pve // by region
	regions []string        // sorted
	nodes   corelisters.NodeLister
}

// newCCM is NewProxmoxPool: one client per cluster.
func newCCM(client kubernetes.Interface, cfg config, f flags, say func(string, ...any)) (*ccm, error) {
	c := &ccm{client: client, cfg: cfg, flags: f, say: say, pool: map[string]*pve{}}

	for _, cl := range cfg.Clusters {
		c.pool[cl.Region] = newPVE(cl)
	}

	if len(c.pool) == 0 {
		return nil, errors.New("cloud provider could not be initialized: clusters not found")
	}

	for r := range c.pool {
		c.regions = append(c.regions, r)
	}

	sort.Strings(c.regions)

	if m := cfg.Features.Network.Mode; m != "default" {
		say("network mode %q: the lab's CCM gives the addresses of the default mode (the kubelet's node IPs)", m)
	}

	return c, nil
}

// lead is the cloud provider's Initialize and the enabled controllers, until ctx ends.
func (c *ccm) lead(ctx context.Context) {
	c.say("leading; clientset initialized")

	for _, region := range c.regions {
		if err := c.checkCluster(ctx, region); err != nil {
			c.say("failed to check proxmox cluster: %v", err)
		}
	}

	factory := informers.NewSharedInformerFactory(c.client, 0)
	nodes := factory.Core().V1().Nodes()
	inf := nodes.Informer()
	c.nodes = nodes.Lister()

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "Nodes"})
	defer queue.ShutDown()

	cloudNode := c.flags.enabled("cloud-node")
	if cloudNode {
		enqueue := func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				queue.Add(key)
			}
		}

		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }})
	}

	factory.Start(ctx.Done())
	defer factory.Shutdown()

	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}

	c.say("proxmox initialized")

	var wg sync.WaitGroup

	if cloudNode {
		wg.Go(func() { c.nodeWorker(ctx, queue) })
		wg.Go(func() { c.every(ctx, c.flags.nodeStatusInterval, c.updateNodeStatus) })
	}

	if c.flags.enabled("cloud-node-lifecycle") {
		wg.Go(func() { c.every(ctx, c.flags.nodeMonitorPeriod, c.monitorNodes) })
	}

	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
}

// checkCluster is the pool's CheckClusters for one region.
func (c *ccm) checkCluster(ctx context.Context, region string) error {
	px := c.pool[region]

	v, err := px.version(ctx)
	if err != nil {
		return fmt.Errorf("failed to initialized proxmox client in region %s, error: %v", region, err)
	}

	vms, err := px.resources(ctx)
	if err != nil {
		return fmt.Errorf("failed to get list of VMs in region %s, error: %v", region, err)
	}

	if len(vms) == 0 {
		c.say("Proxmox cluster has no VMs, or check the account permission (region %s, version %s)", region, v)
	}

	return nil
}

// every runs f at once and then every d (wait.UntilWithContext) until ctx ends.
func (c *ccm) every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()

	for {
		f(ctx)

		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// nodeWorker is the cloud node controller's worker: errors requeue with the rate limiter.
func (c *ccm) nodeWorker(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) {
	for {
		key, shutdown := queue.Get()
		if shutdown {
			return
		}

		if err := c.syncNode(ctx, key); err != nil && ctx.Err() == nil {
			queue.AddRateLimited(key)
			c.say("error syncing '%s': %v, requeuing", key, err)
		} else {
			queue.Forget(key)
		}

		queue.Done(key)
	}
}

// syncNode is the cloud node controller's: a Node with the uninitialized taint gets the
// instance's metadata and loses the taint.
func (c *ccm) syncNode(ctx context.Context, name string) error {
	cur, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}

	if err != nil {
		return err
	}

	if !slices.ContainsFunc(cur.Spec.Taints, func(t corev1.Taint) bool { return t.Key == UninitializedTaint }) {
		return nil
	}

	node := cur.DeepCopy()

	md, err := c.instanceMetadata(ctx, node)
	if err != nil {
		return fmt.Errorf("failed to get instance metadata for node %s: %v", name, err)
	}

	if md.ProviderID == "" {
		if node.Spec.ProviderID == "" {
			return fmt.Errorf("failed to get instance metadata for node %s: cloud provider does not set node provider ID for node %s", name, name)
		}

		md.ProviderID = node.Spec.ProviderID
	}

	if _, err := addressesFromNodeIP(node, md.NodeAddresses); err != nil {
		return fmt.Errorf("failed to get node modifiers from cloud provider: provided node ip for node %q is not valid: %w", name, err)
	}

	err = c.patchNode(ctx, name, func(n *corev1.Node) {
		if n.Spec.ProviderID == "" {
			n.Spec.ProviderID = md.ProviderID
		}

		initLabels(n, md)

		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == UninitializedTaint })
	})
	if err != nil {
		return err
	}

	c.say("Successfully initialized node %s with cloud provider (providerID %s, zone %s, instance type %s)", name,
		md.ProviderID, md.Zone, md.InstanceType)

	c.updateNodeAddress(ctx, name, md)

	return nil
}

var k8sNamespaceRE = regexp.MustCompile(`(^|\.)(kubernetes|k8s)\.io/`)

// initLabels are getNodeModifiersFromCloudProvider's labels.
func initLabels(n *corev1.Node, md *metadata) {
	set := map[string]string{}

	if md.InstanceType != "" {
		set[corev1.LabelInstanceType], set[corev1.LabelInstanceTypeStable] = md.InstanceType, md.InstanceType
	}

	if md.Zone != "" {
		set[corev1.LabelFailureDomainBetaZone], set[corev1.LabelTopologyZone] = md.Zone, md.Zone
	}

	if md.Region != "" {
		set[corev1.LabelFailureDomainBetaRegion], set[corev1.LabelTopologyRegion] = md.Region, md.Region
	}

	addMissing(&n.Labels, set, true)

	extra := map[string]string{}

	for k, v := range md.AdditionalLabels {
		if !k8sNamespaceRE.MatchString(k) {
			extra[k] = v
		}
	}

	addMissing(&n.Labels, extra, false)
}

// updateNodeAddress is the cloud node controller's: an initialized Node gets the cloud's
// addresses, the provided node IPs first.
func (c *ccm) updateNodeAddress(ctx context.Context, name string, md *metadata) {
	if len(md.NodeAddresses) == 0 {
		return
	}

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}

		if hasTaint(node, UninitializedTaint) {
			return nil
		}

		addrs := slices.Clone(md.NodeAddresses)
		if !slices.ContainsFunc(addrs, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeHostName }) {
			for _, a := range node.Status.Addresses {
				if a.Type == corev1.NodeHostName {
					addrs = append(addrs, a)
				}
			}
		}

		if addrs, err = addressesFromNodeIP(node, addrs); err != nil {
			c.say("Failed to update node addresses for node %q: %v", name, err)

			return nil
		}

		if !addressesChanged(node.Status.Addresses, addrs) {
			return nil
		}

		node.Status.Addresses = addrs
		_, err = c.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})

		return err
	})
	if err != nil && ctx.Err() == nil {
		c.say("Error patching node with cloud ip addresses = [%v]", err)
	}
}

// updateNodeStatus is the cloud node controller's periodic UpdateNodeStatus for initialized
// Nodes.
func (c *ccm) updateNodeStatus(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}

	for _, n := range nodes {
		if hasTaint(n, UninitializedTaint) || ctx.Err() != nil {
			continue
		}

		md, err := c.instanceMetadata(ctx, n.DeepCopy())
		if err != nil {
			c.say("Error getting instance metadata for node addresses: %v", err)

			continue
		}

		c.updateNodeAddress(ctx, n.Name, md)
	}
}

// patchNode changes a Node (its metadata and spec), retrying on conflicts.
func (c *ccm) patchNode(ctx context.Context, name string, change func(*corev1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}

		change(n)
		_, err = c.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})

		return err
	})
}

// addressesFromNodeIP is cloud-provider's GetNodeAddressesFromNodeIP for the Node's provided
// node IPs (none: the addresses as they are): each must be among the cloud's addresses.
func addressesFromNodeIP(node *corev1.Node, addrs []corev1.NodeAddress) ([]corev1.NodeAddress, error) {
	provided, ok := node.Annotations[providedNodeIP]
	if !ok {
		return addrs, nil
	}

	var ips []net.IP

	for s := range strings.SplitSeq(provided, ",") {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil {
			return nil, fmt.Errorf("failed to parse node IP %q", provided)
		}

		ips = append(ips, ip)
	}

	out := []corev1.NodeAddress{}
	types := map[corev1.NodeAddressType]bool{}

	for _, ip := range ips {
		matched := false

		for _, a := range addrs {
			if net.ParseIP(a.Address).Equal(ip) {
				out = append(out, a)
				types[a.Type] = true
				matched = true
			}
		}

		if !matched {
			return nil, fmt.Errorf("failed to get node address from cloud provider that matches ip: %v", ip)
		}
	}

	for _, a := range addrs {
		if !types[a.Type] {
			out = append(out, a)
		}
	}

	return out, nil
}

func addressesChanged(a, b []corev1.NodeAddress) bool {
	if len(a) != len(b) {
		return true
	}

	m := map[corev1.NodeAddressType]string{}
	for _, x := range a {
		m[x.Type] = x.Address
	}

	for _, x := range b {
		if m[x.Type] != x.Address {
			return true
		}
	}

	return false
}
