package talosstandin

import (
	"context"
	"crypto/tls"
	stdx509 "crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// credentials is the decoded ClientConfiguration: OS CA and admin client certificate.
type credentials struct {
	ca, crt, key []byte
}

func credentialsFrom(v property.Value) (credentials, error) {
	if !v.IsMap() {
		return credentials{}, errors.New("clientConfiguration: expected an object")
	}

	m := v.AsMap()
	var c credentials

	for _, f := range []struct {
		key string
		dst *[]byte
	}{{"caCertificate", &c.ca}, {"clientCertificate", &c.crt}, {"clientKey", &c.key}} {
		b, err := base64.StdEncoding.DecodeString(str(m, f.key))
		if err != nil || len(b) == 0 {
			return credentials{}, fmt.Errorf("clientConfiguration.%s: expected base64-encoded PEM", f.key)
		}

		*f.dst = b
	}

	return c, nil
}

// target reads the node a resource talks to: its address, the API endpoint (default the node)
// and the client credentials.
func target(inputs property.Map) (node, endpoint string, creds credentials, err error) {
	creds, err = credentialsFrom(inputs.Get("clientConfiguration"))
	node = str(inputs, "node")
	endpoint = firstNonEmpty(str(inputs, "endpoint"), node)

	return node, endpoint, creds, err
}

func (c credentials) tlsConfig() (*tls.Config, error) {
	pool := stdx509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.ca) {
		return nil, errors.New("clientConfiguration.caCertificate: no certificate")
	}

	pair, err := tls.X509KeyPair(c.crt, c.key)
	if err != nil {
		return nil, fmt.Errorf("clientConfiguration: %w", err)
	}

	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}, nil
}

// secureClient connects over mTLS, as the upstream provider does for configured nodes.
func secureClient(ctx context.Context, endpoint string, creds credentials) (*client.Client, error) {
	cfg, err := creds.tlsConfig()
	if err != nil {
		return nil, err
	}

	return client.New(ctx, client.WithEndpoints(endpoint), client.WithTLSConfig(cfg))
}

// insecureClient connects to a node in maintenance mode (no client certificate, server
// certificate not verified), as `talosctl apply --insecure` does.
func insecureClient(ctx context.Context, endpoint string) (*client.Client, error) {
	return client.New(ctx, client.WithEndpoints(endpoint),
		client.WithTLSConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // maintenance mode is insecure by design
}

// talosClientOp runs op the way the upstream provider's talosClientOp does: it first probes the
// node insecurely with Disks (which only answers in maintenance mode) and uses that client if
// the probe succeeds; otherwise it connects over mTLS and addresses the node by name.
func talosClientOp(ctx context.Context, endpoint, node string, creds credentials, op func(context.Context, *client.Client) error) error {
	if c, err := insecureClient(ctx, endpoint); err == nil {
		probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, probeErr := c.Disks(probeCtx)
		cancel()

		if probeErr == nil {
			defer c.Close() //nolint:errcheck

			return op(ctx, c)
		}

		c.Close() //nolint:errcheck
	}

	c, err := secureClient(ctx, endpoint, creds)
	if err != nil {
		return err
	}
	defer c.Close() //nolint:errcheck

	return op(client.WithNode(ctx, node), c)
}

// retry calls f until it succeeds, returns a terminal error, or the deadline passes. As
// upstream, InvalidArgument is terminal; so are the codes listed in terminal.
func retry(ctx context.Context, what string, f func(context.Context) error, terminal ...codes.Code) error {
	var last error

	for attempt := 0; ; attempt++ {
		err := f(ctx)
		if err == nil {
			return nil
		}

		last = err
		code := status.Code(err)
		if code == codes.InvalidArgument {
			return err
		}

		for _, t := range terminal {
			if code == t {
				return err
			}
		}

		wait := time.Duration(min(attempt+1, 5)) * time.Second / 2
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: timed out; last error: %w", what, last)
		case <-time.After(wait):
		}
	}
}

// timeout is the operation's timeout: the resource's timeouts block, else the engine's, else
// upstream's default of 10 minutes. PULUMI_TALOS_LAB_TIMEOUT caps it so a lab fault fails fast.
func timeout(inputs property.Map, op string, engine float64) time.Duration {
	d := 10 * time.Minute

	if s := str(inputs, "timeouts", op); s != "" {
		if parsed, err := time.ParseDuration(s); err == nil {
			d = parsed
		}
	} else if engine > 0 {
		d = time.Duration(engine * float64(time.Second))
	}

	if s := os.Getenv("PULUMI_TALOS_LAB_TIMEOUT"); s != "" {
		if cap, err := time.ParseDuration(s); err == nil && cap < d {
			d = cap
		}
	}

	return d
}
