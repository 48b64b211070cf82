package lifecycle

import (
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
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
