package talosemu_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubecp"
	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/talosemu"
)

// BenchmarkLabCluster measures the lab bringing a cluster up, as the demo does after `pulumi up`
// configured it: nodes installed, bootstrap, etcd joined, API server, kubelets, Talos' manifests,
// until every Node is Ready and CoreDNS is ready. It reports the time and the memory: this
// process (etcd members, node emulators, kubelets) plus the Kubernetes processes.
func BenchmarkLabCluster(b *testing.B) {
	for _, size := range []struct{ cps, workers int }{{3, 0}, {3, 6}} {
		b.Run(fmt.Sprintf("nodes=%d", size.cps+size.workers), func(b *testing.B) {
			for range b.N {
				benchCluster(b, size.cps, size.workers)
			}
		})
	}
}

func benchCluster(b *testing.B, cps, workers int) {
	bin, err := kubecp.Binary()
	if err != nil {
		b.Fatal(err)
	}

	bundle, err := talosemu.SharedBundle()
	if err != nil {
		b.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	start := time.Now()
	cluster := talosemu.NewClusterWith(talosemu.ClusterOptions{Dir: b.TempDir(), Kube: &talosemu.KubeOptions{Bin: bin}})
	defer cluster.Close() //nolint:errcheck

	endpoint := fmt.Sprintf("127.88.%d.1", cps+workers)
	patch := fmt.Sprintf("cluster:\n  controlPlane:\n    endpoint: https://%s:6443\n", endpoint)

	var (
		nodes []*talosemu.Node
		wg    sync.WaitGroup
		errs  = make(chan error, cps+workers)
	)

	for i := range cps + workers {
		typ, name := machine.TypeControlPlane, fmt.Sprintf("cp-%d", i+1)
		if i >= cps {
			typ, name = machine.TypeWorker, fmt.Sprintf("w-%d", i-cps+1)
		}

		n, err := talosemu.Start(ctx, talosemu.Options{Address: fmt.Sprintf("127.88.%d.%d", cps+workers, i+2), Cluster: cluster, Hostname: name})
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close() //nolint:errcheck

		nodes = append(nodes, n)

		cfg, err := bundle.MachineConfig(typ, patch, fmt.Sprintf("machine:\n  network:\n    hostname: %s\n", name))
		if err != nil {
			b.Fatal(err)
		}

		wg.Add(1)

		go func() {
			defer wg.Done()

			errs <- installNode(ctx, n, cfg)
		}()
	}

	wg.Wait()
	close(errs)

	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}

	c := clientFor(b, bundle, nodes[0])
	if err := c.Bootstrap(clientCtx(ctx, nodes[0]), &machineapi.BootstrapRequest{}); err != nil {
		b.Fatal(err)
	}

	waitClusterReady(b, ctx, cluster, cps+workers)

	elapsed := time.Since(start)
	self, children := rss()

	b.ReportMetric(elapsed.Seconds(), "s-to-ready")
	b.ReportMetric(float64(self)/(1<<20), "MiB-lab")
	b.ReportMetric(float64(children)/(1<<20), "MiB-kube")
	b.Logf("lab cluster of %d nodes ready in %s; RSS: lab process %d MiB, Kubernetes processes %d MiB",
		cps+workers, elapsed.Round(10*time.Millisecond), self>>20, children>>20)
}

func waitClusterReady(b *testing.B, ctx context.Context, cluster *talosemu.Cluster, want int) {
	for {
		if ctx.Err() != nil {
			b.Fatal("the cluster did not get ready in time")
		}

		if kc := clusterClient(cluster); kc != nil {
			nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			ready := 0

			if err == nil {
				for _, n := range nodes.Items {
					if nodeReady(kc, n.Name) == nil {
						ready++
					}
				}
			}

			d, derr := kc.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
			if ready == want && derr == nil && d.Status.ReadyReplicas == 2 {
				return
			}
		}

		time.Sleep(100 * time.Millisecond)
	}
}

// rss is this process's resident memory and that of its children (the Kubernetes processes).
func rss() (self, children uint64) {
	self = vmRSS("/proc/self/status")

	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, t := range tasks {
		data, _ := os.ReadFile(t)
		for _, pid := range strings.Fields(string(data)) {
			children += vmRSS("/proc/" + pid + "/status")
		}
	}

	return self, children
}

func vmRSS(path string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close() //nolint:errcheck

	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)

			return kb << 10
		}
	}

	return 0
}

// installNode configures n in maintenance mode and waits until it serves mutual TLS.
func installNode(ctx context.Context, n *talosemu.Node, cfg []byte) error {
	c, err := client.New(ctx, client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true}), client.WithEndpoints(n.IP())) //nolint:gosec // maintenance mode
	if err != nil {
		return err
	}
	defer c.Close() //nolint:errcheck

	if _, err := c.ApplyConfiguration(clientCtx(ctx, n), &machineapi.ApplyConfigurationRequest{Data: cfg}); err != nil {
		return err
	}

	return n.WaitState(ctx, talosemu.StateInstalled, talosemu.StateBootstrapped)
}

func clientFor(b *testing.B, bundle *talosemu.Bundle, n *talosemu.Node) *client.Client {
	c, err := client.New(context.Background(), client.WithConfig(bundle.ClientConfig(n.IP())), client.WithEndpoints(n.IP()))
	if err != nil {
		b.Fatal(err)
	}

	b.Cleanup(func() { c.Close() }) //nolint:errcheck

	return c
}

func clientCtx(ctx context.Context, n *talosemu.Node) context.Context {
	return client.WithNode(ctx, n.IP())
}

// waitClusterClient waits (90 s at most) until the cluster's API server answers, and returns
// client-go for it.
func waitClusterClient(t *testing.T, cluster *talosemu.Cluster, what string) kubernetes.Interface {
	t.Helper()

	var kc kubernetes.Interface

	eventually(t, 90*time.Second, what, func() error {
		if kc = clusterClient(cluster); kc == nil {
			return errors.New("not running")
		}

		_, err := kc.Discovery().ServerVersion()

		return err
	})

	return kc
}

// clusterClient is client-go for the cluster's API server once it runs.
func clusterClient(cluster *talosemu.Cluster) kubernetes.Interface {
	raw := cluster.Kubernetes()
	if raw == nil {
		return nil
	}

	rc, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return nil
	}

	return kubernetes.NewForConfigOrDie(rc)
}
