package spec

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretstest"
)

// TestSecretsBundle: secrets.bundle is read at Build: a bundle is parsed into the generator's
// secrets; one that lacks a field is refused naming the field; an empty one says what to give;
// one not known yet (a preview) is carried, unchecked.
func TestSecretsBundle(t *testing.T) {
	t.Parallel()

	b := secretstest.Bundle()

	text, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}

	in := base()
	in.Secrets = &SecretsInput{Bundle: Patch{Text: string(text), Known: true}}

	c, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}

	if !c.Secrets.Known || c.Secrets.Parsed.ClusterID != b.Cluster.ID || c.Secrets.Parsed.Certs["os"].Cert == "" {
		t.Errorf("parsed secrets: %+v", c.Secrets)
	}

	broken := strings.Replace(string(text), "bootstraptoken:", "bootstrap_tokn:", 1)
	in.Secrets.Bundle.Text = broken

	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "secrets.bundle: secrets.bootstraptoken is missing") {
		t.Errorf("a bundle without its bootstrap token: %v", err)
	}

	in.Secrets.Bundle.Text = " "
	if _, err := Build(in); err == nil || !strings.Contains(err.Error(), "secrets.bundle: is empty; give the cluster's secrets bundle") {
		t.Errorf("an empty bundle: %v", err)
	}

	in.Secrets.Bundle = Patch{}
	if c, err := Build(in); err != nil || c.Secrets == nil || c.Secrets.Known {
		t.Errorf("an unknown bundle: %+v, %v", c, err)
	}
}
