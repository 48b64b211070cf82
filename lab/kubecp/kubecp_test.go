package kubecp

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/crypto/x509"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/etcdmember"
)

// kubeBin is the kube binary: $TALOS_KUBE_BIN, or the one tools/kube/build.sh caches.
func kubeBin(t *testing.T) string {
	t.Helper()

	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}

	return bin
}

func newCA(t *testing.T) *x509.PEMEncodedCertificateAndKey {
	t.Helper()

	ca, err := x509.NewSelfSignedCertificateAuthority(x509.ECDSA(true), x509.Organization("lab"))
	if err != nil {
		t.Fatal(err)
	}

	return x509.NewCertificateAndKeyFromCertificateAuthority(ca)
}

// options are a control plane's options on ip:6443 with fresh secrets, and an etcd member on ip
// (started unless noEtcd).
func options(t *testing.T, ctx context.Context, ip string, noEtcd bool) Options {
	t.Helper()

	etcdCA := newCA(t)
	etcd := etcdmember.Config{Name: "cp-1", IP: net.ParseIP(ip), Dir: t.TempDir(), CA: etcdCA, Fast: true}

	if !noEtcd {
		m, err := etcdmember.Bootstrap(ctx, etcd)
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(m.Stop)
	}

	saKey, err := x509.NewECDSAKey()
	if err != nil {
		t.Fatal(err)
	}

	return Options{
		Bin: kubeBin(t), Dir: t.TempDir(), Endpoint: net.JoinHostPort(ip, "6443"),
		CA: newCA(t), AggregatorCA: newCA(t), ServiceAccountKey: &x509.PEMEncodedKey{Key: saKey.GetPrivateKeyPEM()},
		EtcdEndpoints: []string{"https://" + net.JoinHostPort(ip, "2379")}, EtcdCA: etcdCA,
		Logf: t.Logf,
	}
}

func TestControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	o := options(t, ctx, "127.0.91.1", false)

	begin := time.Now()

	cp, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()

	t.Logf("ready in %s", time.Since(begin).Round(time.Millisecond))

	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}

	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}

	if v.GitVersion != "v1.37.0" || v.Major != "1" || v.Minor != "37" {
		t.Fatalf("/version = %+v, want v1.37.0", v)
	}

	stopHeartbeat := heartbeat(t, ctx, cs, "worker-1")

	labels := map[string]string{"app": "pause"}
	replicas := int32(1)
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}

	if _, err := cs.AppsV1().Deployments("default").Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	minAvailable := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}

	if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, ctx, "a ReplicaSet of the Deployment", func() (bool, error) {
		list, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=pause"})
		return err == nil && len(list.Items) == 1 && list.Items[0].OwnerReferences[0].Name == "pause", err
	})

	eventually(t, ctx, "its Pod bound to worker-1", func() (bool, error) {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=pause"})
		return err == nil && len(list.Items) == 1 && list.Items[0].Spec.NodeName == "worker-1", err
	})

	eventually(t, ctx, "the PodDisruptionBudget's status", func() (bool, error) {
		got, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "pause", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.ExpectedPods == 1 &&
			got.Status.DesiredHealthy == 1, err
	})

	// A node whose heartbeats stop goes NotReady (Unknown) after the 8 s grace period.
	stopHeartbeat()
	eventually(t, ctx, "worker-1 NotReady after its heartbeats stopped", func() (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}

		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status != corev1.ConditionTrue, nil
			}
		}

		return false, nil
	})

	pids := make([]int, 0, len(cp.procs))
	for _, p := range cp.procs {
		pids = append(pids, p.cmd.Process.Pid)
		t.Logf("kube %s: %s", p.name, rss(p.cmd.Process.Pid))
	}

	if len(pids) != 3 {
		t.Fatalf("%d processes, want 3", len(pids))
	}

	cp.Stop()
	cp.Stop()

	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop (kill 0: %v)", pid, err)
		}
	}
}

// TestStartFailure: a component that refuses its flags fails Start with the end of its log.
func TestStartFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	o := options(t, ctx, "127.0.91.2", true)
	o.ServiceCIDR = "10.96.0.0/12,10.112.0.0/12" // the apiserver wants two IP families

	cp, err := Start(ctx, o)
	if err == nil {
		cp.Stop()
		t.Fatal("Start succeeded with two IPv4 service ranges")
	}

	if !strings.Contains(err.Error(), "must be of different IP family") {
		t.Fatalf("the error does not quote the apiserver's log: %v", err)
	}
}

func TestServiceAccountPublicKey(t *testing.T) {
	rsaKey, err := x509.NewRSAKey(x509.Bits(2048))
	if err != nil {
		t.Fatal(err)
	}

	ecKey, err := x509.NewECDSAKey()
	if err != nil {
		t.Fatal(err)
	}

	for name, key := range map[string]*x509.PEMEncodedKey{
		"rsa": {Key: rsaKey.GetPrivateKeyPEM()}, "ecdsa": {Key: ecKey.GetPrivateKeyPEM()},
	} {
		pub, err := publicKeyPEM(key.Key)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}

		if !strings.HasPrefix(string(pub), "-----BEGIN PUBLIC KEY-----") {
			t.Fatalf("%s: %s", name, pub)
		}
	}

	if _, err := publicKeyPEM([]byte("not a key")); err == nil {
		t.Fatal("no error for a non-PEM key")
	}
}

// heartbeat creates a Ready node and renews its lease and status until stopped, as a kubelet does
// (faster than the 8 s node monitor grace period).
func heartbeat(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string) (stop func()) {
	t.Helper()

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}

	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	holder, duration := name, int32(40)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration},
	}

	beat := func() error {
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.RenewTime = &now

		var (
			renewed *coordinationv1.Lease
			err     error
			leases  = cs.CoordinationV1().Leases(lease.Namespace)
		)

		if lease.ResourceVersion == "" {
			renewed, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		} else {
			renewed, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}

		if err != nil {
			return err
		}

		lease = renewed

		// A strategic merge patch, as the kubelet sends: the controllers update the node too.
		patch, err := json.Marshal(map[string]any{"status": readyStatus()})
		if err != nil {
			return err
		}

		_, err = cs.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")

		return err
	}

	if err := beat(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	stop = func() { cancel(); <-done }

	t.Cleanup(stop)

	go func() {
		defer close(done)

		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
				if err := beat(); err != nil && ctx.Err() == nil {
					t.Logf("heartbeat of %s: %v", name, err)
				}
			}
		}
	}()

	return stop
}

// rss is a process's resident memory as /proc reports it (Linux only).
func rss(pid int) string {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return "rss unknown"
	}

	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return "rss " + strings.Join(strings.Fields(v), " ")
		}
	}

	return "rss unknown"
}

func readyStatus() corev1.NodeStatus {
	now := metav1.Now()
	resources := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}

	return corev1.NodeStatus{
		Capacity: resources, Allocatable: resources,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.91.10"}},
	}
}

// eventually polls cond every 250 ms until it holds, failing the test after a minute.
func eventually(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	begin := time.Now()

	var last error

	for {
		ok, err := cond()
		if ok {
			t.Logf("%s after %s", what, time.Since(begin).Round(time.Millisecond))
			return
		}

		if err != nil {
			last = err
		}

		select {
		case <-ctx.Done():
			t.Fatalf("no %s (last error: %v)", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
