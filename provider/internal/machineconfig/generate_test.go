package machineconfig

import (
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/errtest"
	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/secretstest"
)

func testSecrets() Secrets { return SecretsFrom(secretstest.Bundle()) }

func request(contract string, patches ...Patch) Request {
	return Request{
		ClusterName: "lab", Endpoint: "https://10.0.0.10:6443", KubernetesVersion: "v1.34.1",
		Contract: contract, ControlPlane: true, Secrets: testSecrets(), Patches: patches,
	}
}

const hostnamePatch = "apiVersion: v1alpha1\nkind: HostnameConfig\nauto: \"off\"\nhostname: cp-1\n"

func TestGenerateIsStableAndSecretsRoundTrip(t *testing.T) {
	t.Parallel()

	for _, contract := range []string{"v1.10", "v1.11", "v1.12", "v1.13", "v1.14"} {
		a, err := Generate(request(contract))
		if err != nil {
			t.Fatalf("contract %s: %v", contract, err)
		}

		b, _ := Generate(request(contract))
		if a != b {
			t.Errorf("contract %s: two generations differ", contract)
		}

		cfg, err := configloader.NewFromBytes([]byte(a))
		if err != nil {
			t.Fatal(err)
		}

		if got, want := cfg.DiscoveryIdentityConfig().ClusterID(), testSecrets().ClusterID; got != want {
			t.Errorf("contract %s: cluster id %q, want the secrets' %q", contract, got, want)
		}

		docs := len(cfg.Documents())
		if multi := docs > 1; multi != (contract >= "v1.12") {
			t.Errorf("contract %s: %d documents", contract, docs)
		}
	}
}

func TestLaterPatchesWin(t *testing.T) {
	t.Parallel()

	out, err := Generate(request("v1.13",
		Patch{From: "configPatches[0]", Text: "machine:\n  sysctls:\n    a: \"1\"\n    b: \"1\"\n"},
		Patch{From: "nodes.cp-1.configPatches[0]", Text: "machine:\n  sysctls:\n    b: \"2\"\n"},
	))
	if err != nil {
		t.Fatal(err)
	}

	cfg, _ := configloader.NewFromBytes([]byte(out))
	if s := cfg.Machine().Sysctls(); s["a"] != "1" || s["b"] != "2" {
		t.Errorf("sysctls = %v, want a=1 from the cluster patch and b=2 from the node's", s)
	}
}

func TestPatchErrorsNameThePatch(t *testing.T) {
	t.Parallel()

	json6902 := `[{"op": "add", "path": "/machine/sysctls", "value": {"a": "1"}}]`

	// One document up to v1.11: JSON patches apply.
	if _, err := Generate(request("v1.11", Patch{From: "configPatches[0]", Text: json6902})); err != nil {
		t.Errorf("a JSON patch on contract v1.11: %v", err)
	}

	for _, tc := range []struct {
		name, contract string
		patches        []Patch
		want           []string
	}{
		{"JSON patch on several documents", "v1.12", []Patch{{From: "configPatches[2]", Text: json6902}},
			[]string{"configPatches[2]", "JSON6902", "as a strategic merge:\nmachine:\n    sysctls:\n        a: \"1\"\n"}},
		{"hostname beside HostnameConfig", "v1.13", []Patch{
			{From: "the component's patch for node cp-1", Text: hostnamePatch},
			{From: "nodes.cp-1.configPatches[0]", Text: "machine:\n  network:\n    hostname: other\n"},
		}, []string{"static hostname is already set", "HostnameConfig", "machine.network.hostname"}},
		{"v1alpha1 kubelet beside KubeletConfig", "v1.14", []Patch{{From: "workerConfigPatches[0]", Text: "machine:\n  kubelet:\n    extraArgs:\n      max-pods: \"200\"\n"}},
			[]string{"workerConfigPatches[0]", "kubelet config is already set", "kind: KubeletConfig"}},
		{"not a patch", "v1.13", []Patch{{From: "workerConfigPatches[1]", Text: "machine: [\n"}},
			[]string{"workerConfigPatches[1]"}},
	} {
		_, err := Generate(request(tc.contract, tc.patches...))
		errtest.Says(t, tc.name, err, tc.want...)
	}
}

func TestIncompleteSecrets(t *testing.T) {
	t.Parallel()

	s := testSecrets()
	s.Certs = map[string]CertAndKey{"etcd": s.Certs["etcd"]}

	r := request("v1.13")
	r.Secrets = s

	if _, err := Generate(r); err == nil || !strings.Contains(err.Error(), "machine secrets") {
		t.Errorf("secrets without most certificates: %v", err)
	}
}

// BenchmarkGenerate is one node's configuration (contract v1.13, a node patch): what every
// preview pays per node.
func BenchmarkGenerate(b *testing.B) {
	r := request("v1.13", Patch{From: "node", Text: hostnamePatch})

	for b.Loop() {
		if _, err := Generate(r); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStrategicForm(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{
		`[{"op": "replace", "path": "/cluster/network/cni/name", "value": "none"}, {"op": "remove", "path": "/machine/install/extraKernelArgs"}]`: "cluster:\n    network:\n        cni:\n            name: none\nmachine:\n    install:\n        extraKernelArgs:\n            $patch: delete\n",
		`[{"op": "add", "path": "/machine/network/interfaces/0/vip", "value": {"ip": "10.0.0.10"}}]`:                                              "",
		`[{"op": "move", "from": "/a", "path": "/b"}]`:                                                                                            "",
		`machine: {}`: "",
	} {
		if got := strategicForm(in); got != want {
			t.Errorf("%s:\ngot  %q\nwant %q", in, got, want)
		}
	}
}

// A refused JSON patch's suggested strategic merge shows a password it sets as a fingerprint.
func TestRefusedPatchSuggestionHidesSecrets(t *testing.T) {
	t.Parallel()

	form := strategicForm(`[{"op": "add", "path": "/machine/registries/config/r.example.com/auth/password", "value": "hunter2-patch-password"}]`)
	if strings.Contains(form, "hunter2-patch-password") || !strings.Contains(form, "password: <redacted sha256:") || !strings.Contains(form, "r.example.com") {
		t.Fatalf("the suggestion: %q", form)
	}
}
