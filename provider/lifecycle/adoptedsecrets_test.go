package lifecycle

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"go.yaml.in/yaml/v4"
)

func bundleText(t *testing.T) string {
	t.Helper()

	b, err := secrets.NewBundle(secrets.NewClock(), config.TalosVersion1_11)
	if err != nil {
		t.Fatal(err)
	}

	out, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}

	return string(out)
}

// An adopted cluster's secrets issue a Talos admin client certificate from the bundle's CA once,
// valid for years; the same CA keeps it, another CA replaces it.
func TestAdoptedSecrets(t *testing.T) {
	t.Parallel()

	args := AdoptedSecretsArgs{Bundle: bundleText(t), Contract: "v1.11"}

	created, err := (&AdoptedSecrets{}).Create(t.Context(), infer.CreateRequest[AdoptedSecretsArgs]{Inputs: args})
	if err != nil {
		t.Fatal(err)
	}

	s := created.Output

	caPEM, _ := base64.StdEncoding.DecodeString(s.CaCertificate)
	crtPEM, _ := base64.StdEncoding.DecodeString(s.ClientCertificate)
	caBlock, _ := pem.Decode(caPEM)
	crtBlock, _ := pem.Decode(crtPEM)

	if caBlock == nil || crtBlock == nil || s.ClientKey == "" {
		t.Fatalf("issued %+v", s)
	}

	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}

	crt, err := x509.ParseCertificate(crtBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}

	if err := crt.CheckSignatureFrom(ca); err != nil || crt.NotAfter.Before(time.Now().Add(9*365*24*time.Hour)) ||
		len(crt.Subject.Organization) != 1 || crt.Subject.Organization[0] != "os:admin" {
		t.Errorf("client certificate: %v, until %v, subject %v", err, crt.NotAfter, crt.Subject)
	}

	diff := func(in AdoptedSecretsArgs) infer.DiffResponse {
		resp, err := (&AdoptedSecrets{}).Diff(t.Context(), infer.DiffRequest[AdoptedSecretsArgs, AdoptedSecretsState]{Inputs: in, State: s})
		if err != nil {
			t.Fatal(err)
		}

		return resp
	}

	if d := diff(args); d.HasChanges {
		t.Errorf("the same bundle: %+v", d)
	}

	reshaped := args
	reshaped.Bundle = "# the same secrets\n" + args.Bundle

	if d := diff(reshaped); !d.HasChanges || d.DetailedDiff["bundle"].Kind != p.Update {
		t.Errorf("the same CA in another text: %+v", d)
	}

	other := args
	other.Bundle = bundleText(t)

	if d := diff(other); d.DetailedDiff["bundle"].Kind != p.UpdateReplace {
		t.Errorf("another CA: %+v", d)
	}
}
