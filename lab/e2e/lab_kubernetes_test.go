//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// versionWatch records, through watches on the real API server, when each control-plane mirror
// pod first runs an image of version and when each Node first reports kubeletVersion version:
// "<component> <node>" in the order they happened.
type versionWatch struct {
	mu    sync.Mutex
	order []string
	seen  map[string]bool
}

func watchVersions(ctx context.Context, t *testing.T, kc kubernetes.Interface, version string) *versionWatch {
	t.Helper()

	w := &versionWatch{seen: map[string]bool{}}

	note := func(what string) {
		w.mu.Lock()
		defer w.mu.Unlock()

		if !w.seen[what] {
			w.seen[what] = true
			w.order = append(w.order, what)
		}
	}

	follow := func(open func() (watch.Interface, error), on func(any)) {
		for ctx.Err() == nil {
			wi, err := open()
			if err != nil {
				time.Sleep(100 * time.Millisecond)

				continue
			}

			for ev := range wi.ResultChan() {
				on(ev.Object)
			}

			wi.Stop()
		}
	}

	go follow(func() (watch.Interface, error) {
		return kc.CoreV1().Pods("kube-system").Watch(ctx, metav1.ListOptions{})
	}, func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" || len(pod.Spec.Containers) == 0 || !strings.HasSuffix(pod.Spec.Containers[0].Image, ":"+version) {
			return
		}

		for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			if pod.Name == c+"-"+pod.Spec.NodeName {
				note(c + " " + pod.Spec.NodeName)
			}
		}
	})

	go follow(func() (watch.Interface, error) {
		return kc.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	}, func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && n.Status.NodeInfo.KubeletVersion == version {
			note("kubelet " + n.Name)
		}
	})

	return w
}

func (w *versionWatch) events() []string {
	w.mu.Lock()
	defer w.mu.Unlock()

	return slices.Clone(w.order)
}

// bootstrapState is what the Kubernetes upgrade could change of Talos' bootstrap manifests: the
// kube-proxy DaemonSet's pod template, the generations of CoreDNS and Flannel.
type bootstrapState struct {
	proxy            corev1.PodTemplateSpec
	coreDNS, flannel int64
}

func bootstrapManifests(t *testing.T, kc kubernetes.Interface) bootstrapState {
	t.Helper()

	ctx := t.Context()

	proxy, err := kc.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	coreDNS, err := kc.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	flannel, err := kc.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-flannel", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	return bootstrapState{proxy: proxy.Spec.Template, coreDNS: coreDNS.Generation, flannel: flannel.Generation}
}

// TestKubernetesUpgrade changes kubernetesVersion by one minor on a running 3 + 2 cluster: the
// preview shows the Kubernetes upgrade and a configuration change applied without a reboot on
// every node (no OS upgrade); the up moves kube-apiserver on every control plane, then
// kube-controller-manager, then kube-scheduler, then every kubelet one node at a time, control
// planes first (as seen by watches on the API server), with no reboot, no kubelet ever newer than
// an API server; of Talos' bootstrap manifests only the kube-proxy DaemonSet's image changes
// (CoreDNS and Flannel are not re-applied, as upgrade-k8s would); the preview after shows nothing.
func TestKubernetesUpgrade(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 38}, func(l *lab.Lab) string { return haCluster(l, "k8sup", "v1.11.5") })

	mustRun(t, p, "up", "--yes", "--skip-preview")

	const from, to = "v1.33.5", "v1.34.1"

	editProgram(t, e, "kubernetesVersion: "+from, "kubernetesVersion: "+to)

	if got := previewUpdates(t, p, nodeUpgradeType); len(got) != 0 {
		t.Errorf("a Kubernetes upgrade shows OS upgrades (reboots) %v", got)
	}

	if got := previewUpdates(t, p, "talos-proxmox:lifecycle:KubernetesUpgrade"); !slices.Equal(got, []string{"update k8sup-kubernetes"}) {
		t.Errorf("the preview shows Kubernetes upgrades %v, want [update k8sup-kubernetes]", got)
	}

	preview := mustRun(t, p, "preview", "--diff")
	if n := strings.Count(preview, "; applies live"); n != 5 {
		t.Errorf("the preview says %d times that a node's configuration applies without a reboot, want 5:\n%s", n, preview)
	}

	boots := map[string]string{}
	for name, n := range labNodes(t, l) {
		boots[name] = n.BootID()
	}

	kc := kubeClient(t, mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets"))
	bootstrap := bootstrapManifests(t, kc)

	ctx, cancel := context.WithCancel(t.Context())
	w := watchVersions(ctx, t, kc, to)

	time.Sleep(500 * time.Millisecond) // the watches are open

	start := time.Now()
	out := mustRun(t, p, "up", "--yes", "--skip-preview")
	took := time.Since(start)

	time.Sleep(500 * time.Millisecond) // the last events arrive
	cancel()

	got := w.events()

	var want []string

	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
			want = append(want, c+" "+n)
		}
	}

	for _, n := range []string{"cp-1", "cp-2", "cp-3", "worker-1", "worker-2"} {
		want = append(want, "kubelet "+n)
	}

	if !slices.Equal(got, want) {
		t.Errorf("components moved to %s in the order\n  %v\nwant\n  %v", to, got, want)
	}

	if !strings.Contains(out, "checking for removed Kubernetes API resource versions") {
		t.Errorf("the up did not run upgrade-k8s' pre-checks:\n%s", out)
	}

	if !strings.Contains(out, "Kubernetes "+to+" on every node") {
		t.Errorf("the up does not report the upgrade:\n%s", out)
	}

	for name, n := range labNodes(t, l) {
		if n.BootID() != boots[name] {
			t.Errorf("%s rebooted during a Kubernetes upgrade", name)
		}
	}

	nodes, err := kc.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for _, n := range nodes.Items {
		if v := n.Status.NodeInfo.KubeletVersion; v != to {
			t.Errorf("node %s reports kubelet %s, want %s", n.Name, v, to)
		}
	}

	for _, cp := range []string{"cp-1", "cp-2", "cp-3"} {
		pod, err := kc.CoreV1().Pods("kube-system").Get(t.Context(), "kube-apiserver-"+cp, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}

		if img := pod.Spec.Containers[0].Image; img != "registry.k8s.io/kube-apiserver:"+to {
			t.Errorf("kube-apiserver on %s runs %s", cp, img)
		}
	}

	// Unlike upgrade-k8s, which ends by applying Talos' bootstrap manifests again, the upgrade
	// changes the kube-proxy DaemonSet's image and nothing else of them (docs/operations.md).
	after := bootstrapManifests(t, kc)
	if img := after.proxy.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+to) {
		t.Errorf("the kube-proxy DaemonSet runs %s", img)
	}

	after.proxy.Spec.Containers[0].Image = bootstrap.proxy.Spec.Containers[0].Image
	if !equality.Semantic.DeepEqual(after.proxy, bootstrap.proxy) {
		t.Errorf("the kube-proxy DaemonSet's pod template changed beyond its image:\nbefore %+v\nafter  %+v", bootstrap.proxy, after.proxy)
	}

	if after.coreDNS != bootstrap.coreDNS || after.flannel != bootstrap.flannel {
		t.Errorf("CoreDNS (generation %d → %d) or Flannel (%d → %d) changed; the Kubernetes upgrade does not re-apply Talos' bootstrap manifests",
			bootstrap.coreDNS, after.coreDNS, bootstrap.flannel, after.flannel)
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	t.Logf("%s → %s took %s; order %s\nup:\n%s", from, to, took.Round(time.Millisecond), fmt.Sprint(got), out)
}
