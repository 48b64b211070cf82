package talosstandin

import (
	"context"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"go.yaml.in/yaml/v4"
	"google.golang.org/grpc/codes"
)

// bootstrap implements Bootstrap create: retry MachineService.Bootstrap over mTLS until the
// timeout. InvalidArgument is terminal, as upstream; so is AlreadyExists (etcd already runs),
// which upstream would only report after its timeout.
func bootstrap(ctx context.Context, inputs property.Map, engineTimeout float64) (property.Map, error) {
	node, endpoint, creds, err := target(inputs)
	if err != nil {
		return property.Map{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, timeout(inputs, "create", engineTimeout))
	defer cancel()

	err = retry(ctx, "bootstrapping "+node, func(ctx context.Context) error {
		c, err := secureClient(ctx, endpoint, creds)
		if err != nil {
			return err
		}
		defer c.Close() //nolint:errcheck

		return c.Bootstrap(client.WithNode(ctx, node), &machineapi.BootstrapRequest{})
	}, codes.AlreadyExists)
	if err != nil {
		return property.Map{}, err
	}

	return withOutputs(inputs, map[string]property.Value{"endpoint": property.New(endpoint)}), nil
}

// kubeconfig implements Kubeconfig create: read the admin kubeconfig from the node (a tar.gz
// with one `kubeconfig` file), retrying until the timeout.
func kubeconfig(ctx context.Context, inputs property.Map, engineTimeout float64) (property.Map, error) {
	node, endpoint, creds, err := target(inputs)
	if err != nil {
		return property.Map{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, timeout(inputs, "create", engineTimeout))
	defer cancel()

	var raw []byte

	err = retry(ctx, "reading the kubeconfig from "+node, func(ctx context.Context) error {
		c, err := secureClient(ctx, endpoint, creds)
		if err != nil {
			return err
		}
		defer c.Close() //nolint:errcheck

		raw, err = c.Kubeconfig(client.WithNode(ctx, node))

		return err
	})
	if err != nil {
		return property.Map{}, err
	}

	kcc, err := kubernetesClientConfiguration(raw)
	if err != nil {
		return property.Map{}, err
	}

	return withOutputs(inputs, map[string]property.Value{
		"endpoint":                      property.New(endpoint),
		"certificateRenewalDuration":    property.New(firstNonEmpty(str(inputs, "certificateRenewalDuration"), "720h")),
		"kubeconfigRaw":                 property.New(string(raw)).WithSecret(true),
		"kubernetesClientConfiguration": kcc,
	}), nil
}

// kubernetesClientConfiguration extracts host, CA and client certificate from a kubeconfig.
func kubernetesClientConfiguration(raw []byte) (property.Value, error) {
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
				CA     string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User struct {
				Crt string `yaml:"client-certificate-data"`
				Key string `yaml:"client-key-data"`
			} `yaml:"user"`
		} `yaml:"users"`
	}

	if err := yaml.Unmarshal(raw, &kc); err != nil {
		return property.Value{}, fmt.Errorf("parsing the kubeconfig: %w", err)
	}

	if len(kc.Clusters) == 0 || len(kc.Users) == 0 || !strings.HasPrefix(kc.Clusters[0].Cluster.Server, "https://") {
		return property.Value{}, fmt.Errorf("the node returned a kubeconfig without cluster or user")
	}

	return property.New(property.NewMap(map[string]property.Value{
		"host":              property.New(kc.Clusters[0].Cluster.Server),
		"caCertificate":     property.New(kc.Clusters[0].Cluster.CA),
		"clientCertificate": property.New(kc.Users[0].User.Crt),
		"clientKey":         property.New(kc.Users[0].User.Key),
	})).WithSecret(true), nil
}
