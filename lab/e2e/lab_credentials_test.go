//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// shortLivedCluster is the small cluster with client certificates valid for 3 minutes and
// renewed in their last 2: an `up` more than a minute after they were issued renews them.
func shortLivedCluster(l *lab.Lab) string {
	return strings.Replace(smallCluster(l, "creds"), "      talosVersion: v1.11.5\n",
		"      talosVersion: v1.11.5\n      credentials:\n        validity: 3m\n        renewBefore: 2m\n", 1) +
		"  kubeconfig: ${creds.kubeconfig}\n  talosconfig: ${creds.talosconfig}\n"
}

// TestCredentialsRenewWithinTheWindow: right after `up` the credentials are not due and preview
// shows nothing; once they are within renewBefore of expiry, preview shows the update of the
// credentials (naming their expiry), `up` issues new ones, the outputs change, and the new
// kubeconfig and talosconfig work with client-go and the Talos client.
func TestCredentialsRenewWithinTheWindow(t *testing.T) {
	t.Parallel()

	_, p := onLab(t, newEnv(t), lab.Options{Subnet: 81}, shortLivedCluster)

	if out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}

	kc1 := mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets")
	tc1 := mustRun(t, p, "stack", "output", "talosconfig", "--show-secrets")
	credentialsWork(t, kc1, tc1)

	notAfter := credentialsExpiry(t, p)
	if time.Until(notAfter) <= 2*time.Minute {
		t.Skipf("the up took too long for this test's window (expiry %s); nothing to check", notAfter)
	}

	if out, err := p.Run(t.Context(), "preview", "--expect-no-changes"); err != nil {
		t.Errorf("credentials that are not due show a change: %v\n%s", err, out)
	}

	time.Sleep(time.Until(notAfter.Add(-2*time.Minute)) + 2*time.Second)

	out, err := p.Run(t.Context(), "preview", "--diff")
	if err != nil {
		t.Fatalf("preview: %v\n%s", err, out)
	}

	if !strings.Contains(out, "creds-credentials") || !strings.Contains(out, "within renewBefore (2m0s): this update issues new ones") {
		t.Errorf("preview does not show the renewal:\n%s", out)
	}

	if out, err := p.Run(t.Context(), "up", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("up renewing the credentials: %v\n%s", err, out)
	}

	kc2 := mustRun(t, p, "stack", "output", "kubeconfig", "--show-secrets")
	tc2 := mustRun(t, p, "stack", "output", "talosconfig", "--show-secrets")

	if kc2 == kc1 || tc2 == tc1 {
		t.Fatal("the outputs did not change")
	}

	if renewed := credentialsExpiry(t, p); !renewed.After(notAfter) {
		t.Errorf("expiry %s after the renewal, %s before", renewed, notAfter)
	}

	credentialsWork(t, kc2, tc2)
}

func credentialsExpiry(t *testing.T, p *lab.Pulumi) time.Time {
	t.Helper()

	for _, r := range exportState(t, p).Deployment.Resources {
		if r.Type == "talos-proxmox:lifecycle:ClientCredentials" {
			at, err := time.Parse(time.RFC3339, r.Outputs["notAfter"].(string))
			if err != nil {
				t.Fatal(err)
			}

			return at
		}
	}

	t.Fatal("no ClientCredentials in the state")

	return time.Time{}
}

// credentialsWork lists the Nodes with the kubeconfig and reads each node's version with the
// talosconfig.
func credentialsWork(t *testing.T, kubeconfig, talosconfig string) {
	t.Helper()

	list, err := kubeClient(t, kubeconfig).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("the kubeconfig: %v (%d Nodes)", err, len(list.Items))
	}

	cfg, err := clientconfig.FromString(talosconfig)
	if err != nil {
		t.Fatal(err)
	}

	c, err := client.New(t.Context(), client.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() //nolint:errcheck

	for _, node := range cfg.Contexts[cfg.Context].Nodes {
		if _, err := c.Version(client.WithNode(t.Context(), node)); err != nil {
			t.Fatalf("the talosconfig does not reach node %s: %v", node, err)
		}
	}
}
