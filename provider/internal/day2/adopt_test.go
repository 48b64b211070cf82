package day2

import (
	"errors"
	"testing"
)

func TestImageTag(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{
		"registry.k8s.io/kube-apiserver:v1.34.1":                 "kube-apiserver:v1.34.1",
		"mirror.local:5000/k8s/kube-apiserver:v1.33.5@sha256:ab": "kube-apiserver:v1.33.5",
		"kube-apiserver": "kube-apiserver",
	} {
		if got := imageTag(in); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", in, got, want)
		}
	}
}

// A TLS failure about certificates, either way, is a foreign CA; a node that is down is not.
func TestForeignCA(t *testing.T) {
	t.Parallel()

	for msg, want := range map[string]bool{
		`rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`: true,
		"remote error: tls: unknown certificate authority": true,
		"remote error: tls: bad certificate":               true,
		`connection error: desc = "transport: Error while dialing: dial tcp 10.0.0.11:50000: connect: connection refused"`: false,
		"context deadline exceeded": false,
	} {
		if got := foreignCA(errors.New(msg)); got != want {
			t.Errorf("foreignCA(%q) = %v", msg, got)
		}
	}
}
