//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/safe"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config/configpatcher"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

const nodeConfigType = "talos-proxmox:lifecycle:NodeConfig"

// configPreview is what `pulumi preview --json` says about the NodeConfigs: per node (by
// resource name) the operation, the detailed diff's keys and the redacted configuration before
// (state) and after (inputs), and the messages logged for it.
type configPreview map[string]struct {
	Op                      string
	Diff                    []string
	Redacted, RedactedAfter string
	Messages                []string
}

func previewConfigs(t *testing.T, p *lab.Pulumi) (configPreview, string) {
	t.Helper()

	out := mustRun(t, p, "preview", "--json")

	var doc struct {
		Steps []struct {
			Op           string                     `json:"op"`
			URN          string                     `json:"urn"`
			DetailedDiff map[string]json.RawMessage `json:"detailedDiff"`
			OldState     struct {
				Outputs map[string]any `json:"outputs"`
			} `json:"oldState"`
			NewState struct {
				Inputs map[string]any `json:"inputs"`
			} `json:"newState"`
		} `json:"steps"`
		Diagnostics []struct {
			URN     string `json:"urn"`
			Message string `json:"message"`
		} `json:"diagnostics"`
	}

	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &doc); err != nil {
		t.Fatalf("reading the preview: %v\n%s", err, out)
	}

	name := func(urn string) string { return urn[strings.LastIndex(urn, "::")+2:] }
	res := configPreview{}

	for _, s := range doc.Steps {
		if !strings.Contains(s.URN, "$"+nodeConfigType+"::") {
			continue
		}

		e := res[name(s.URN)]
		e.Op = s.Op
		e.Redacted, _ = s.OldState.Outputs["redactedConfiguration"].(string)
		e.RedactedAfter, _ = s.NewState.Inputs["redactedConfiguration"].(string)

		for k := range s.DetailedDiff {
			e.Diff = append(e.Diff, k)
		}

		res[name(s.URN)] = e
	}

	for _, d := range doc.Diagnostics {
		if strings.Contains(d.URN, "$"+nodeConfigType+"::") {
			e := res[name(d.URN)]
			e.Messages = append(e.Messages, d.Message)
			res[name(d.URN)] = e
		}
	}

	return res, out
}

// TestConfigurationDiffAndDrift changes a configuration patch of a running cluster: the preview
// (text and JSON) shows each node's redacted configuration before and after, the patched field
// and "applies live". A registry password from secret stack config is added, then rotated: the
// preview shows its old and new fingerprints. The Talos version changes. Then a node's
// configuration is changed behind the stack's back through its Talos API: the preview shows drift
// on exactly that node, `refresh` records what it runs, the next `up` applies the declared
// configuration again and the preview after is clean. No text shown (previews with --diff and
// --json, ups, the refresh, the exported state) holds a secret of the stack or either password.
func TestConfigurationDiffAndDrift(t *testing.T) {
	t.Parallel() // its own lab (subnet), Pulumi home and backend

	e := newEnv(t)
	l, p := onLab(t, e, lab.Options{Subnet: 40}, func(l *lab.Lab) string { return haCluster(l, "drift", "v1.11.5") })

	texts := map[string]string{"the first up": mustRun(t, p, "up", "--yes", "--skip-preview")}

	editProgram(t, e, "      clusterName: drift\n", "      clusterName: drift\n      configPatches:\n        - |\n          machine:\n            sysctls:\n              net.core.somaxconn: \"65535\"\n")

	texts["preview --diff of a patch"] = mustRun(t, p, "preview", "--diff")
	configs, js := previewConfigs(t, p)
	texts["preview --json of a patch"] = js

	for _, node := range []string{"cp-1", "cp-2", "cp-3", "worker-1", "worker-2"} {
		c := configs["drift-"+node+"-node-config"]

		switch {
		case c.Op != "update" || !strings.Contains(strings.Join(c.Diff, ","), "redactedConfiguration"):
			t.Errorf("%s: the preview's step is %q with diff %v, want an update of redactedConfiguration", node, c.Op, c.Diff)
		case strings.Contains(c.Redacted, "somaxconn") || !strings.Contains(c.RedactedAfter, "net.core.somaxconn: \"65535\""):
			t.Errorf("%s: the redacted configurations do not show the new sysctl:\nbefore:\n%s\nafter:\n%s", node, c.Redacted, c.RedactedAfter)
		case !strings.Contains(c.RedactedAfter, "<redacted sha256:"):
			t.Errorf("%s: the redacted configuration has no fingerprint:\n%s", node, c.RedactedAfter)
		}

		if want := node + `: configuration changes: v1alpha1: .machine.sysctls: (none) → {net.core.somaxconn: "65535"}; applies live`; !strings.Contains(strings.Join(c.Messages, "\n"), want) {
			t.Errorf("%s: the preview does not say %q: %v", node, want, c.Messages)
		}
	}

	if !strings.Contains(texts["preview --diff of a patch"], "net.core.somaxconn") {
		t.Errorf("the preview's diff does not show the sysctl:\n%s", texts["preview --diff of a patch"])
	}

	texts["the up of a patch"] = mustRun(t, p, "up", "--yes", "--skip-preview")
	mustRun(t, p, "preview", "--expect-no-changes")

	// A rotated credential: a registry password from secret stack config, changed. The preview
	// shows its fingerprints, old and new, never the passwords.
	passwords := []string{"first-registry-password-111", "second-registry-password-222"}
	mustRun(t, p, "config", "set", "--secret", "registryPassword", passwords[0])
	editProgram(t, e, "config:\n", "config:\n  registryPassword:\n    type: string\n    secret: true\n")
	editProgram(t, e, "              net.core.somaxconn: \"65535\"\n", "              net.core.somaxconn: \"65535\"\n"+
		"        - |\n          machine:\n            registries:\n              config:\n                registry.example.com:\n"+
		"                  auth:\n                    username: robot\n                    password: ${registryPassword}\n")
	texts["the up of a registry password"] = mustRun(t, p, "up", "--yes", "--skip-preview")

	mustRun(t, p, "config", "set", "--secret", "registryPassword", passwords[1])
	texts["preview --diff of a rotated password"] = mustRun(t, p, "preview", "--diff")
	configs, js = previewConfigs(t, p)
	texts["preview --json of a rotated password"] = js

	rotated := ".machine.registries.config.registry.example.com.auth.password: " + fingerprint(passwords[0]) + " → " + fingerprint(passwords[1])
	for _, node := range []string{"cp-1", "worker-2"} {
		if msgs := strings.Join(configs["drift-"+node+"-node-config"].Messages, "\n"); !strings.Contains(msgs, rotated) {
			t.Errorf("%s: the preview of a rotated password does not say %q:\n%s", node, rotated, msgs)
		}
	}

	texts["the up of a rotated password"] = mustRun(t, p, "up", "--yes", "--skip-preview")

	// A Talos version: every node's installer image changes.
	setTalosVersion(t, e, "v1.11.5", "v1.11.6")
	texts["preview --diff of a version"] = mustRun(t, p, "preview", "--diff")
	_, texts["preview --json of a version"] = previewConfigs(t, p)
	texts["the up of a version"] = mustRun(t, p, "up", "--yes", "--skip-preview")
	mustRun(t, p, "preview", "--expect-no-changes")

	for where, text := range texts {
		for _, pw := range passwords {
			if strings.Contains(text, pw) {
				t.Errorf("%s shows the registry password %q", where, pw)
			}
		}
	}

	// Behind the stack's back: worker-2 gets another sysctl through its Talos API.
	c := stackTalosClient(t, p, l.Address(22))
	defer c.Close() //nolint:errcheck

	patchRunning(t, c, l.Address(22), "machine:\n  sysctls:\n    vm.max_map_count: \"262144\"\n")

	preview := mustRun(t, p, "preview", "--diff")
	texts["preview --diff of drift"] = preview
	configs, js = previewConfigs(t, p)
	texts["preview --json of drift"] = js

	for _, node := range []string{"cp-1", "cp-2", "cp-3", "worker-1", "worker-2"} {
		got, msgs := configs["drift-"+node+"-node-config"].Op, strings.Join(configs["drift-"+node+"-node-config"].Messages, "\n")

		switch drift := strings.Contains(msgs, node+": drift:"); {
		case node == "worker-2" && (got != "update" || !drift || !strings.Contains(msgs, "-        vm.max_map_count: \"262144\"")):
			t.Errorf("worker-2 drifted: the preview's step is %q and says:\n%s", got, msgs)
		case node != "worker-2" && (got != "" || drift): // no step: the same (preview --json lists no sames)
			t.Errorf("%s did not drift, yet the preview's step is %q and says:\n%s", node, got, msgs)
		}
	}

	texts["refresh"] = mustRun(t, p, "refresh", "--yes", "--skip-preview", "--diff")
	if !strings.Contains(texts["refresh"], "vm.max_map_count") {
		t.Errorf("the refresh does not show the drift:\n%s", texts["refresh"])
	}

	texts["the up that undoes the drift"] = mustRun(t, p, "up", "--yes", "--skip-preview")

	if running := runningConfig(t, c, l.Address(22)); strings.Contains(running, "vm.max_map_count") || !strings.Contains(running, "somaxconn") {
		t.Errorf("worker-2 runs, after the up:\n%s", running)
	}

	mustRun(t, p, "preview", "--expect-no-changes")

	noSecretLeaks(t, p, texts)
}

// runningConfig reads the configuration node addr runs (COSI MachineConfig).
func runningConfig(t *testing.T, c *client.Client, addr string) string {
	t.Helper()

	mc, err := safe.StateGetByID[*config.MachineConfig](client.WithNode(t.Context(), addr), c.COSI, config.ActiveID)
	if err != nil {
		t.Fatal(err)
	}

	out, err := mc.Provider().EncodeString(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		t.Fatal(err)
	}

	return out
}

// patchRunning patches the configuration node addr runs and applies it without a reboot, as
// `talosctl patch machineconfig --mode no-reboot` does.
func patchRunning(t *testing.T, c *client.Client, addr, patch string) {
	t.Helper()

	ctx := client.WithNode(t.Context(), addr)

	mc, err := safe.StateGetByID[*config.MachineConfig](ctx, c.COSI, config.ActiveID)
	if err != nil {
		t.Fatal(err)
	}

	p, err := configpatcher.LoadPatch([]byte(patch))
	if err != nil {
		t.Fatal(err)
	}

	out, err := configpatcher.Apply(configpatcher.WithConfig(mc.Provider()), []configpatcher.Patch{p})
	if err != nil {
		t.Fatal(err)
	}

	data, err := out.Bytes()
	if err != nil {
		t.Fatal(err)
	}

	if _, err := c.ApplyConfiguration(ctx, &machineapi.ApplyConfigurationRequest{Data: data, Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT}); err != nil {
		t.Fatal(err)
	}
}

// fingerprint is how a secret value shows in a redacted configuration: the first 8 hex digits of
// its SHA-256 (computed here as a user would check it).
func fingerprint(v string) string {
	sum := sha256.Sum256([]byte(v))

	return fmt.Sprintf("<redacted sha256:%x>", sum[:4])
}
