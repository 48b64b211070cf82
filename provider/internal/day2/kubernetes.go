package day2

// The Kubernetes upgrade follows Talos' own upgrade-k8s (pkg/cluster/kubernetes in
// siderolabs/talos v1.14.1, MPL-2.0): each control-plane component on every control plane in
// turn, then kube-proxy, then every kubelet, each by patching the node's running machine
// configuration (COSI MachineConfig) with machinery's stdpatches (v1alpha1 fields, or the Kube*
// documents of contract v1.14, as the configuration has them) and applying it without a
// reboot. What differs: the waits read the mirror pods' images and the Nodes' kubelet versions
// through client-go rather than Talos' per-service COSI resources, and images keep the
// repository the node runs (a registry mirror stays in place) instead of Talos' defaults.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/go-kubernetes/kubernetes/upgrade"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	cfgconfig "github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/stdpatches"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// KubernetesUpgradeOptions describe a Kubernetes upgrade of the whole cluster.
type KubernetesUpgradeOptions struct {
	Access        Access
	ControlPlanes []Node
	Workers       []Node
	// From is the version the cluster runs, To the one every component ends on ("v1.35.0" or
	// "1.35.0").
	From, To string
	// Timeout bounds each wait (one component on one node).
	Timeout  time.Duration
	Progress Progress
	// CheckReady requires each Node to be Ready once its kubelet reports the new version (false
	// for a cluster without a CNI, whose Nodes are never Ready).
	CheckReady bool
}

// KubernetesUpgradeResult says what moved.
type KubernetesUpgradeResult struct {
	// Updated lists "<component> on <node>" in the order they were changed.
	Updated []string
}

// component is one Kubernetes component Talos runs: how to read its image from a machine
// configuration and how to patch it, in the form of the configuration's contract (v1alpha1
// fields up to v1.13, the Kube* documents of v1.14), as machinery's stdpatches write it.
type component struct {
	name     string
	fallback string
	image    func(cfgconfig.Config) string
	guess    func(cfgconfig.Container) *cfgconfig.VersionContract
	patch    func(*cfgconfig.VersionContract, string) ([]byte, error)
}

var controlPlaneComponents = []component{
	{"kube-apiserver", constants.KubernetesAPIServerImage, func(c cfgconfig.Config) string {
		if a := c.K8sAPIServerConfig(); a != nil {
			return a.Image()
		}

		return ""
	}, stdpatches.GuessVersionContractKubeAPIServer, stdpatches.WithKubeAPIServerImage},
	{"kube-controller-manager", constants.KubernetesControllerManagerImage, func(c cfgconfig.Config) string {
		if a := c.K8sControllerManagerConfig(); a != nil {
			return a.Image()
		}

		return ""
	}, stdpatches.GuessVersionContractKubeControllerManager, stdpatches.WithKubeControllerManagerImage},
	{"kube-scheduler", constants.KubernetesSchedulerImage, func(c cfgconfig.Config) string {
		if a := c.K8sSchedulerConfig(); a != nil {
			return a.Image()
		}

		return ""
	}, stdpatches.GuessVersionContractKubeScheduler, stdpatches.WithKubeSchedulerImage},
}

var proxyComponent = component{"kube-proxy", constants.KubeProxyImage, func(c cfgconfig.Config) string {
	if a := c.K8sProxyConfig(); a != nil {
		return a.Image()
	}

	return ""
}, stdpatches.GuessVersionContractKubeProxy, stdpatches.WithKubeProxyImage}

var kubeletComponent = component{"kubelet", constants.KubeletImage, func(c cfgconfig.Config) string {
	if a := c.K8sKubeletConfig(); a != nil {
		return a.Image()
	}

	return ""
}, stdpatches.GuessVersionContractKubelet, stdpatches.WithKubeletImage}

// UpgradeKubernetes moves the cluster to o.To the way Talos' upgrade-k8s does: kube-apiserver
// on every control plane (one at a time, each waited for until its mirror pod runs the new image
// and is Ready), then kube-controller-manager, then kube-scheduler, then kube-proxy (the
// machine configuration and its DaemonSet) when it is enabled, then the kubelet of every node,
// control planes first (each waited for until its Node reports the new kubeletVersion and is
// Ready). So no kubelet is ever newer than an API server. A component that already runs o.To is
// left alone, so an interrupted upgrade resumes where it stopped.
func UpgradeKubernetes(ctx context.Context, o KubernetesUpgradeOptions) (KubernetesUpgradeResult, error) {
	var res KubernetesUpgradeResult

	to := "v" + strings.TrimPrefix(o.To, "v")

	kube, err := o.Access.Kube()
	if err != nil {
		return res, err
	}

	if err := o.preChecks(ctx); err != nil {
		return res, err
	}

	for _, comp := range controlPlaneComponents {
		for _, n := range o.ControlPlanes {
			image, err := o.patch(ctx, n, comp, to)
			if err != nil {
				return res, err
			}

			if err := poll(ctx, o.Timeout, fmt.Sprintf("%s on %s to run %s", comp.name, n.Name, to), o.Progress, func(ctx context.Context) error {
				return mirrorPodRuns(ctx, kube, comp.name, n.Name, image)
			}); err != nil {
				return res, err
			}

			if image != "" {
				res.Updated = append(res.Updated, comp.name+" on "+n.Name)
			}
		}
	}

	proxied, err := o.upgradeProxy(ctx, kube, to)
	if err != nil {
		return res, err
	}

	res.Updated = append(res.Updated, proxied...)

	for _, n := range append(append([]Node{}, o.ControlPlanes...), o.Workers...) {
		image, err := o.patch(ctx, n, kubeletComponent, to)
		if err != nil {
			return res, err
		}

		if err := poll(ctx, o.Timeout, fmt.Sprintf("the kubelet of %s to report %s", n.Name, to), o.Progress, func(ctx context.Context) error {
			return kubeletReports(ctx, kube, n.Name, to, o.CheckReady)
		}); err != nil {
			return res, err
		}

		if image != "" {
			res.Updated = append(res.Updated, "kubelet on "+n.Name)
		}
	}

	return res, nil
}

// patch sets comp's image on node n to version to, keeping its repository (and a -fat/-slim
// kubelet suffix), and applies the configuration without a reboot. It returns the new image, or
// "" when the node already runs it.
func (o KubernetesUpgradeOptions) patch(ctx context.Context, n Node, comp component, to string) (string, error) {
	c, err := o.Access.Talos(ctx, n.Address)
	if err != nil {
		return "", err
	}
	defer c.Close() //nolint:errcheck

	mc, err := safe.StateGetByID[*config.MachineConfig](client.WithNode(ctx, n.Address), c.COSI, config.ActiveID)
	if err != nil {
		return "", fmt.Errorf("reading the machine configuration of %s: %w", n.Name, err)
	}

	current := mc.Provider()
	was := comp.image(current)

	image := nextImage(was, comp.fallback, to)
	if image == was {
		return "", nil
	}

	patch, err := stdpatches.PreparePatch(comp.patch(comp.guess(current), image))
	if err != nil {
		return "", fmt.Errorf("patching the %s image of %s: %w", comp.name, n.Name, err)
	}

	out, err := configpatcher.Apply(configpatcher.WithConfig(current), []configpatcher.Patch{patch})
	if err != nil {
		return "", fmt.Errorf("patching the machine configuration of %s: %w", n.Name, err)
	}

	patched, err := out.Config()
	if err != nil {
		return "", fmt.Errorf("patching the machine configuration of %s: %w", n.Name, err)
	}

	data, err := patched.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return "", fmt.Errorf("encoding the machine configuration of %s: %w", n.Name, err)
	}

	o.Progress.say("%s on %s: %s → %s", comp.name, n.Name, versionOf(was), to)

	if _, err := c.ApplyConfiguration(ctx, &machineapi.ApplyConfigurationRequest{
		Data: data, Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT,
	}); err != nil {
		return "", fmt.Errorf("applying the new %s image to %s: %w", comp.name, n.Name, err)
	}

	return image, nil
}

// nextImage is current with its tag set to version (keeping a -fat/-slim suffix and dropping a
// digest); fallback is the repository when current is empty (Talos' default image).
func nextImage(current, fallback, version string) string {
	repo, tag := fallback, ""
	if current != "" {
		repo, tag = splitImage(current)
	}

	for _, suffix := range []string{"-fat", "-slim"} {
		if strings.HasSuffix(tag, suffix) {
			version += suffix
		}
	}

	return repo + ":" + version
}

// splitImage is an image reference's repository and tag ("" if none), a digest dropped.
func splitImage(ref string) (repo, tag string) {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:]
	}

	return ref, ""
}

func versionOf(image string) string {
	if _, tag := splitImage(image); tag != "" {
		return tag
	}

	return "the default"
}

// upgradeProxy moves kube-proxy when the cluster runs it: the image in each control plane's
// configuration (what Talos renders its manifest from) and the DaemonSet Talos deployed.
func (o KubernetesUpgradeOptions) upgradeProxy(ctx context.Context, kube kubernetes.Interface, to string) ([]string, error) {
	ds, err := kube.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // disabled (e.g. Cilium replaces it)
	}

	if err != nil {
		return nil, fmt.Errorf("reading the kube-proxy DaemonSet: %w", err)
	}

	var done []string

	for _, n := range o.ControlPlanes {
		image, err := o.patch(ctx, n, proxyComponent, to)
		if err != nil {
			return done, err
		}

		if image != "" {
			done = append(done, "kube-proxy on "+n.Name)
		}
	}

	for i, ctr := range ds.Spec.Template.Spec.Containers {
		if ctr.Name != "kube-proxy" {
			continue
		}

		image := nextImage(ctr.Image, constants.KubeProxyImage, to)
		if image == ctr.Image {
			return done, nil
		}

		ds.Spec.Template.Spec.Containers[i].Image = image
		if _, err := kube.AppsV1().DaemonSets("kube-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
			return done, fmt.Errorf("updating the kube-proxy DaemonSet to %s: %w", image, err)
		}

		return append(done, "kube-proxy DaemonSet"), poll(ctx, o.Timeout, "the kube-proxy DaemonSet to roll out "+to, o.Progress,
			func(ctx context.Context) error { return rolledOut(ctx, kube, ds.Name) })
	}

	return done, nil
}

func rolledOut(ctx context.Context, kube kubernetes.Interface, name string) error {
	ds, err := kube.AppsV1().DaemonSets("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}

	s := ds.Status
	if s.ObservedGeneration < ds.Generation || s.UpdatedNumberScheduled < s.DesiredNumberScheduled || s.NumberAvailable < s.DesiredNumberScheduled {
		return fmt.Errorf("%d of %d pods updated, %d available", s.UpdatedNumberScheduled, s.DesiredNumberScheduled, s.NumberAvailable)
	}

	return nil
}

// mirrorPodRuns checks that the static pod's mirror pod on node runs image (any image when
// image is "", i.e. unchanged) and is Ready.
func mirrorPodRuns(ctx context.Context, kube kubernetes.Interface, name, node, image string) error {
	pod, err := kube.CoreV1().Pods("kube-system").Get(ctx, name+"-"+node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("mirror pod %s-%s: %w", name, node, err)
	}

	if image != "" && (len(pod.Spec.Containers) == 0 || pod.Spec.Containers[0].Image != image) {
		return fmt.Errorf("%s on %s still runs the previous image", name, node)
	}

	if pod.Status.Phase != corev1.PodRunning || !podReady(pod) {
		return fmt.Errorf("%s on %s is %s, not running and ready", name, node, pod.Status.Phase)
	}

	return nil
}

// kubeletReports checks that the Node reports kubeletVersion version and, with ready, is Ready.
func kubeletReports(ctx context.Context, kube kubernetes.Interface, name, version string, ready bool) error {
	node, err := NodeReady(ctx, kube, name)
	if node == nil {
		return err
	}

	if got := node.Status.NodeInfo.KubeletVersion; got != version {
		return fmt.Errorf("node %s reports kubelet %s", name, got)
	}

	if !ready {
		return nil
	}

	return err
}

// preChecks are upgrade-k8s' own (go-kubernetes' upgrade.Checks): flags, admission plugins and
// feature gates the new version removed, read from each node's static pods and kubelet spec, and
// API resource versions it removed that the cluster still stores. Nothing is changed before they pass.
func (o KubernetesUpgradeOptions) preChecks(ctx context.Context) error {
	if o.From == "" {
		return nil
	}

	path, err := upgrade.NewPath(o.From, o.To)
	if err != nil {
		return err
	}

	rc, err := o.Access.RESTConfig()
	if err != nil {
		return err
	}

	var clients []*client.Client

	defer func() {
		for _, c := range clients {
			c.Close() //nolint:errcheck
		}
	}()

	stateOf := func(ctx context.Context, node string) (state.State, error) {
		c, err := o.Access.Talos(ctx, node)
		if err != nil {
			return nil, err
		}

		clients = append(clients, c)

		return c.COSI, nil
	}

	checks, err := upgrade.NewChecksWithStateProvider(path, stateOf, rc, Addresses(o.ControlPlanes), Addresses(o.Workers),
		func(format string, args ...any) { o.Progress.say(format, args...) })
	if err != nil {
		return err
	}

	if err := checks.Run(ctx); err != nil {
		return fmt.Errorf("the cluster uses what Kubernetes %s removed; nothing was changed: %w", o.To, err)
	}

	return nil
}

// Addresses are the nodes' addresses, in order.
func Addresses(nodes []Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Address
	}

	return out
}
