package talosemu

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/blang/semver"
	"github.com/siderolabs/talos/pkg/machinery/config"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
)

// HungPodFunc reports whether an emulated kubelet must never finish terminating pod.
type HungPodFunc func(pod *corev1.Pod) bool

// runningKubelet is one node's emulated kubelet and the options it runs with.
type runningKubelet struct {
	opts    kubeletemu.Options
	kubelet *kubeletemu.Kubelet
	node    *Node
	// specs is the nodeSpecsKey of the labels and taints last synced to its Node ("": none yet).
	specs string
}

func (k *runningKubelet) stop() { k.kubelet.Stop() }

// kubeletHealthy is what ServiceList reports for n's kubelet: its emulated kubelet runs; without
// Kubernetes in the lab, once the cluster is bootstrapped.
func (c *Cluster) kubeletHealthy(n *Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	if c.opts.Kube == nil {
		return c.runningLocked() > 0
	}

	return c.kube != nil && c.kube.kubelets[n] != nil
}

// reconcileKubelets runs a kubelet on every booted node and stops those of nodes that went down
// (their Node then goes NotReady by the node lifecycle controller, as in reality). A node whose
// kubelet settings changed (e.g. a new kubelet image) gets a new kubelet, as a restart does.
func (c *Cluster) reconcileKubelets(ctx context.Context, v controlPlaneView) {
	c.mu.Lock()
	k := c.kube
	if k == nil || k.cp == nil {
		c.mu.Unlock()
		return
	}

	var stop []*runningKubelet

	for n, kl := range k.kubelets {
		rec, up := v.upNodes[n]
		if !up || kubeletKey(kl.opts) != kubeletKey(c.kubeletOptions(k, rec)) {
			stop = append(stop, kl)
			delete(k.kubelets, n)
		}
	}

	var (
		start  []*Node
		noNode []error
	)

	for n, rec := range v.upNodes {
		if k.kubelets[n] != nil {
			continue
		}

		if len(kubeletNodeIPs(rec.cfg, rec.addrs)) == 0 {
			// Talos' NodeIPController finds none: the kubelet never starts.
			noNode = append(noNode, fmt.Errorf("%s: no suitable node IP found, please make sure .machine.kubelet.nodeIP filters "+
				"and pod/service subnets are set up correctly (node addresses %v)", rec.hostname, rec.addrs))

			continue
		}

		start = append(start, n)
	}
	c.mu.Unlock()

	for _, err := range noNode {
		c.noteKubeError(err)
	}

	for _, kl := range stop {
		kl.stop()
		kl.node.setStaticPods(false)
	}

	for _, n := range start {
		opts := c.kubeletOptions(k, v.upNodes[n])

		kl, err := kubeletemu.Start(ctx, opts)
		if err != nil {
			c.noteKubeError(err)

			continue
		}

		c.mu.Lock()
		kept := c.kube == k && k.kubelets[n] == nil
		if kept {
			k.kubelets[n] = &runningKubelet{opts: opts, kubelet: kl, node: n}
			c.notifyLocked()
		}
		c.mu.Unlock()

		if !kept {
			kl.Stop()

			continue
		}

		n.setStaticPods(true)
	}
}

// kubeletOptions are the emulated kubelet's settings from the node's configuration, with k's
// client (k, not c.kube: that may be stopped, and set to nil, by a node's goroutine meanwhile).
func (c *Cluster) kubeletOptions(k *kube, rec nodeRecord) kubeletemu.Options {
	cfg := rec.cfg
	cp := rec.controlPlane

	opts := kubeletemu.Options{
		Client:                         k.client,
		NodeName:                       rec.hostname,
		InternalIPs:                    addrStrings(kubeletNodeIPs(cfg, rec.addrs)),
		KubeletVersion:                 imageTag(kubeletImage(cfg)),
		OSImage:                        "Talos (" + rec.version + ")",
		BootID:                         rec.bootID,
		SystemUUID:                     rec.systemUUID,
		ControlPlane:                   cp,
		AllowSchedulingOnControlPlanes: allowSchedulingOnControlPlanes(cfg),
		Labels:                         nodeLabels(cfg),
		Taints:                         registerTaints(cfg, rec.version, cp),
		ProviderID:                     kubeletProviderID(cfg),
		ExternalCloudProvider:          kubeletExternalCloudProvider(cfg),
		HeartbeatInterval:              c.opts.Kube.Heartbeat,
		HungPod:                        c.opts.Kube.HungPod,
		Containers:                     c.opts.Kube.Containers,
		Logf:                           c.opts.Logf,
	}

	if cp {
		opts.StaticPods = staticPods(cfg)
	}

	// The moment this boot's Node first said Ready, to the millisecond (benchmarks read it).
	var said atomic.Bool

	opts.OnStatus = func(ready bool) {
		if ready && !said.Swap(true) {
			c.log.add(Event{Node: rec.hostname, Kind: "ready"})
		}
	}

	return opts
}

func addrStrings(addrs []netip.Addr) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.String())
	}

	return out
}

// staticPods are the control-plane static pods Talos runs, with the images of the configuration
// and the labels Talos gives them.
func staticPods(cfg config.Config) []kubeletemu.StaticPod {
	pod := func(name, image string) kubeletemu.StaticPod {
		return kubeletemu.StaticPod{
			Name: name, Image: image,
			Labels: map[string]string{"k8s-app": name, "tier": "control-plane"},
		}
	}

	apiServer, controllerManager, scheduler := controlPlaneImages(cfg)

	return []kubeletemu.StaticPod{
		pod("kube-apiserver", apiServer),
		pod("kube-controller-manager", controllerManager),
		pod("kube-scheduler", scheduler),
	}
}

// imageTag is the tag of an image reference ("" if none).
func imageTag(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}

	return ""
}

// kubeletKey identifies a kubelet's settings (funcs and the client left out): a change means a
// kubelet restart.
//
// Labels are not kubelet settings: Talos applies them to the Node itself (applyNodeSpecs), live.
// Taints are also the kubelet's registerWithTaints, so a change restarts it, as on Talos.
func kubeletKey(o kubeletemu.Options) string {
	o.Client, o.HungPod, o.Logf, o.Containers = nil, nil, nil, nil
	o.Labels = nil

	return fmt.Sprintf("%+v", o)
}

// applyNodeSpecs runs Talos' node apply (syncNodeSpecs) for each node whose kubelet runs, when its
// configuration's labels or taints changed since they last reached its Node. A Node not
// registered yet, or a conflicting write, is tried again at the next reconcile.
func (c *Cluster) applyNodeSpecs(ctx context.Context, v controlPlaneView) {
	type job struct {
		kl     *runningKubelet
		name   string
		labels map[string]string
		taints []corev1.Taint
		key    string
		// controlPlane: Talos writes with an admin client (else the kubelet's).
		controlPlane bool
	}

	c.mu.Lock()
	k := c.kube
	if k == nil || k.cp == nil {
		c.mu.Unlock()
		return
	}

	var jobs []job

	for n, kl := range k.kubelets {
		rec, up := v.upNodes[n]
		if !up || rec.cfg == nil {
			continue
		}

		labels, taints := nodeSpecs(rec.cfg)
		if key := nodeSpecsKey(labels, taints); key != kl.specs {
			jobs = append(jobs, job{kl: kl, name: rec.hostname, labels: labels, taints: taints, key: key, controlPlane: rec.controlPlane})
		}
	}

	client, rc := k.client, k.cp.RESTConfig()
	c.mu.Unlock()

	for _, j := range jobs {
		nodeClient := client
		if !j.controlPlane {
			// Talos writes a worker's Node with the kubelet's credentials, so NodeRestriction
			// applies: a worker cannot change its taints (nor set restricted labels).
			var err error
			if nodeClient, err = asNode(rc, j.name); err != nil {
				continue
			}
		}

		if err := syncNodeSpecs(ctx, nodeClient, j.name, j.labels, j.taints); err != nil {
			c.opts.Logf("talosemu %s: applying labels and taints to the Node: %v", j.name, err)
			continue
		}

		c.mu.Lock()
		j.kl.specs = j.key
		c.mu.Unlock()
	}
}

// kubeletTaintsFromConfig is the first Talos version that registers the kubelet with all of the
// configuration's taints (its KubeNodeConfig refactor).
var kubeletTaintsFromConfig = semver.MustParse("1.14.0-alpha.0")

// registerTaints are the taints a node's kubelet registers with: from Talos v1.14 the
// configuration's (Talos puts them in registerWithTaints); before, only the control-plane taint
// (on control planes unless scheduling on them is allowed) and what machine.kubelet.extraConfig
// gives as registerWithTaints.
func registerTaints(cfg config.Config, version string, controlPlane bool) []corev1.Taint {
	_, taints := nodeSpecs(cfg)

	if v, err := semver.ParseTolerant(version); err == nil && v.GTE(kubeletTaintsFromConfig) {
		if taints == nil {
			return []corev1.Taint{}
		}

		return taints
	}

	out := []corev1.Taint{}

	if controlPlane && !allowSchedulingOnControlPlanes(cfg) {
		out = append(out, corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule})
	}

	if k := cfg.K8sKubeletConfig(); k != nil {
		list, _ := k.ExtraConfig()["registerWithTaints"].([]any)
		for _, item := range list {
			t, _ := item.(map[string]any)
			key, _ := t["key"].(string)
			value, _ := t["value"].(string)
			effect, _ := t["effect"].(string)

			if key != "" && !slices.ContainsFunc(out, func(o corev1.Taint) bool { return o.Key == key }) {
				out = append(out, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
			}
		}
	}

	return out
}

// asNode is a client acting as node name's kubelet (system:node:<name> in system:nodes), through
// the admin's impersonation: the API server's Node authorizer and NodeRestriction apply to it.
func asNode(rc *rest.Config, name string) (kubernetes.Interface, error) {
	rc = rest.CopyConfig(rc)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + name, Groups: []string{"system:nodes", "system:authenticated"}}

	return kubernetes.NewForConfig(rc)
}
