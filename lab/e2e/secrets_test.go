//go:build e2e

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// secretMarker is the key Pulumi's state uses to mark a secret value ({marker: secretSig,
// "plaintext": …} with --show-secrets, "ciphertext" without).
const (
	secretMarker = "4dabf18193072939515e22adb298388d"
	secretSig    = "1b47061264138c4ac30d75fd1eb44270"
)

// upWithLogs runs `pulumi up` with the engine's and the plugins' logs at verbosity level flowing
// into files of their own (TMPDIR), and returns the CLI's output and every log written.
//
// Level 8 for Go and YAML programs. Python and TypeScript programs get level 2: their Pulumi SDKs
// send every registered output, secrets in plaintext, as debug messages (Python's
// register_resource_outputs, Node's "RegisterResource RPC finished … resp"), and the engine writes
// debug messages to its log from level 3 (pkg/engine/eventsink.go) — Pulumi's behaviour, for any
// provider. The component's own logging is the same whatever the language: the Go and YAML runs
// check it at level 8.
func upWithLogs(t *testing.T, p *lab.Pulumi, level int) (string, string) {
	t.Helper()

	logDir := t.TempDir()
	q := *p
	q.Env = append(slices.Clone(p.Env), "TMPDIR="+logDir)

	out, err := q.Run(t.Context(), "up", "--yes", "--skip-preview", "--logflow", fmt.Sprintf("-v=%d", level))
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}

	var logs strings.Builder

	_ = filepath.WalkDir(logDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			logs.Write(b)
		}

		return nil
	})

	if logs.Len() == 0 {
		t.Errorf("the up at -v=%d wrote no log under TMPDIR; the leak check would see nothing", level)
	}

	return out, logs.String()
}

// noSecretLeaks checks every secret of the stack — the Talos secrets bundle (CA keys, bootstrap
// token, secretbox key, etcd CA), the machine configurations, the kubeconfig and the talosconfig —
// against what must hold none of it in plaintext: `pulumi stack export` and the given texts (the
// CLI's output, the engine's and plugins' logs). `stack export --show-secrets` must hold them.
func noSecretLeaks(t *testing.T, p *lab.Pulumi, texts map[string]string) {
	t.Helper()

	shown := mustRun(t, p, "stack", "export", "--show-secrets")

	var doc any
	if err := json.Unmarshal([]byte(shown), &doc); err != nil {
		t.Fatal(err)
	}

	secrets := map[string]bool{}
	collectSecrets(doc, secrets)

	for _, want := range []string{"bootstrapToken", "secretboxEncryptionSecret", "client-key-data", "LS0tLS1CRUdJTi"} {
		if !strings.Contains(shown, want) {
			t.Errorf("stack export --show-secrets holds no %q", want)
		}
	}

	if len(secrets) < 10 {
		t.Fatalf("only %d secret values found in the state; the check would prove nothing", len(secrets))
	}

	texts["stack export"] = mustRun(t, p, "stack", "export")

	for where, text := range texts {
		leaks := 0

		for s := range secrets {
			if strings.Contains(text, s) {
				leaks++
				if leaks <= 3 {
					i := strings.Index(text, s)
					t.Errorf("%s holds a secret in plaintext: %.60q… in:\n%s", where, s, text[max(0, i-400):i])
				}
			}
		}

		if leaks > 3 {
			t.Errorf("%s: %d secrets in plaintext in all", where, leaks)
		}
	}

	t.Logf("checked %d secret values against %d texts", len(secrets), len(texts))
}

// collectSecrets gathers the private material of every secret value in an exported state: the
// strings under a key, token, secret or password field of the secret's plaintext (JSON), and of
// the YAML documents inside it (a machine configuration, a kubeconfig, a talosconfig). Certificates
// and the rest of a configuration (image names, addresses) are public and not collected.
func collectSecrets(v any, into map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if x[secretMarker] == secretSig {
			if plain, ok := x["plaintext"].(string); ok {
				var inner any
				if json.Unmarshal([]byte(plain), &inner) != nil {
					inner = plain
				}

				private(inner, false, into)
			}

			return
		}

		for _, e := range x {
			collectSecrets(e, into)
		}
	case []any:
		for _, e := range x {
			collectSecrets(e, into)
		}
	}
}

var privateField = regexp.MustCompile(`(?i)(key|token|secret|password)`)

// labelKey is a Kubernetes label key ("node-role.kubernetes.io/control-plane"), the value of a
// selector's `key:` field in a manifest: public, not key material.
var labelKey = regexp.MustCompile(`^[a-z0-9][-a-z0-9.]*\.[a-z]{2,}/[a-z0-9][-a-z0-9.]*$`)

func private(v any, under bool, into map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			private(e, under || privateField.MatchString(k), into)
		}
	case []any:
		for _, e := range x {
			private(e, under, into)
		}
	case string:
		var doc any
		if strings.Contains(x, "\n") && yaml.Unmarshal([]byte(x), &doc) == nil {
			if _, isText := doc.(string); !isText && doc != nil {
				private(normalise(doc), under, into)
				return
			}
		}

		if under && len(x) >= 16 && x != secretSig && !strings.HasPrefix(x, base64Certificate) && !labelKey.MatchString(x) {
			addForms(x, into)
		}
	}
}

// addForms adds a secret in the forms it could leak in: as it is, base64-decoded (a PEM key is
// kept base64-encoded), and each line of the PEM body it holds.
func addForms(x string, into map[string]bool) {
	into[x] = true

	b, err := base64.StdEncoding.DecodeString(x)
	if err != nil {
		return
	}

	if text := strings.TrimSpace(string(b)); len(text) >= 16 {
		into[text] = true
	}

	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			into[line] = true
		}
	}
}

// base64Certificate starts a base64-encoded PEM certificate (public, handed out with the keys).
const base64Certificate = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"

// normalise turns YAML maps with non-string keys into map[string]any.
func normalise(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalise(e)
		}

		return x
	case map[any]any:
		out := map[string]any{}
		for k, e := range x {
			if s, ok := k.(string); ok {
				out[s] = normalise(e)
			}
		}

		return out
	case []any:
		for i, e := range x {
			x[i] = normalise(e)
		}

		return x
	default:
		return v
	}
}

// talosconfigUsesNodes: the talosconfig output reaches the Talos API at the control planes' own
// addresses, never at the VIP (the VIP is for the Kubernetes API; Talos' docs warn that the Talos
// API through the VIP breaks when etcd or the VIP's holder is down).
func talosconfigUsesNodes(t *testing.T, talosconfig string, l *lab.Lab) {
	t.Helper()

	var cfg struct {
		Contexts map[string]struct {
			Endpoints []string `yaml:"endpoints"`
		} `yaml:"contexts"`
	}
	if err := yaml.Unmarshal([]byte(talosconfig), &cfg); err != nil || len(cfg.Contexts) == 0 {
		t.Fatalf("the talosconfig output does not parse: %v\n%s", err, talosconfig)
	}

	for name, c := range cfg.Contexts {
		if len(c.Endpoints) == 0 || slices.Contains(c.Endpoints, l.Address(10)) {
			t.Errorf("talosconfig context %s has endpoints %v: want the control planes' addresses, not the VIP %s", name, c.Endpoints, l.Address(10))
		}
	}
}
