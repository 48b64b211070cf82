package day2

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Node is one cluster node as the component knows it.
type Node struct {
	// Name is the node's hostname, which is also its Kubernetes Node name and etcd member name.
	Name string
	// Address is the node's IP: its Talos API is on port 50000.
	Address      string
	ControlPlane bool
}

// Access is what reaches a cluster: the talosconfig and the admin kubeconfig the component outputs.
type Access struct {
	Talosconfig string
	Kubeconfig  string
}

// Talos returns a Talos API client that talks to one node's apid directly.
func (a Access) Talos(ctx context.Context, address string) (*client.Client, error) {
	if a.Talosconfig == "" {
		return nil, errors.New("no talosconfig: the cluster's client configuration is not known yet")
	}

	cfg, err := clientconfig.FromString(a.Talosconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the talosconfig: %w", err)
	}

	return client.New(ctx, client.WithConfig(cfg), client.WithEndpoints(address))
}

// Kube returns a Kubernetes client from the admin kubeconfig; each request gives up after 15 s.
func (a Access) Kube() (kubernetes.Interface, error) {
	rc, err := a.RESTConfig()
	if err != nil {
		return nil, err
	}

	rc.Timeout = 15 * time.Second

	return kubernetes.NewForConfig(rc)
}

// RESTConfig is the admin kubeconfig's client configuration. Reads that meet a transient failure
// are sent again (see retryReads).
func (a Access) RESTConfig() (*rest.Config, error) {
	if a.Kubeconfig == "" {
		return nil, errors.New("no kubeconfig: the cluster's Kubernetes access is not known yet")
	}

	rc, err := clientcmd.RESTConfigFromKubeConfig([]byte(a.Kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}

	rc.Wrap(wrapRetryReads)

	return rc, nil
}
