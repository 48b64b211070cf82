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

// Diff renews exactly when the certificates expire within renewBefore or what they name changed.
func TestClientCredentialsDiff(t *testing.T) {
	t.Parallel()

	args := ClientCredentialsArgs{ClusterName: "homelab", Endpoint: "https://10.0.0.10:6443", TalosNodes: []string{"10.0.0.11"},
		Validity: "8760h", RenewBefore: "720h"}

	for _, tc := range []struct {
		name       string
		expiresIn  time.Duration
		change     func(*ClientCredentialsArgs)
		update     bool
		renewsKeys []string
	}{
		{"far from expiry", 200 * 24 * time.Hour, func(*ClientCredentialsArgs) {}, false, nil},
		{"inside the window", 10 * 24 * time.Hour, func(*ClientCredentialsArgs) {}, true, []string{"notAfter"}},
		{"expired", -time.Hour, func(*ClientCredentialsArgs) {}, true, []string{"notAfter"}},
		{"a wider window", 200 * 24 * time.Hour, func(a *ClientCredentialsArgs) { a.RenewBefore = "5000h" }, true, []string{"notAfter"}},
		{"a narrower window only", 200 * 24 * time.Hour, func(a *ClientCredentialsArgs) { a.RenewBefore = "24h" }, true, []string{"renewBefore"}},
		{"a new node", 200 * 24 * time.Hour, func(a *ClientCredentialsArgs) { a.TalosNodes = []string{"10.0.0.11", "10.0.0.12"} }, true,
			[]string{"talosconfig", "kubeconfig"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			state := ClientCredentialsState{ClientCredentialsArgs: args, NotAfter: time.Now().Add(tc.expiresIn).UTC().Format(time.RFC3339)}
			in := args
			in.TalosNodes = append([]string(nil), args.TalosNodes...)
			tc.change(&in)

			resp, err := (&ClientCredentials{}).Diff(t.Context(), infer.DiffRequest[ClientCredentialsArgs, ClientCredentialsState]{
				ID: "credentials", Inputs: in, State: state,
			})
			if err != nil {
				t.Fatal(err)
			}

			if resp.HasChanges != tc.update || len(resp.DetailedDiff) != len(tc.renewsKeys) {
				t.Fatalf("changes %v %v, want %v %v", resp.HasChanges, resp.DetailedDiff, tc.update, tc.renewsKeys)
			}

			for _, k := range tc.renewsKeys {
				if _, ok := resp.DetailedDiff[k]; !ok {
					t.Errorf("detailed diff %v lacks %s", resp.DetailedDiff, k)
				}
			}
		})
	}
}

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
