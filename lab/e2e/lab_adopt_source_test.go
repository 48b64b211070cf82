//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab"
)

// TestHandwrittenAdoptSourceMatchesTheComponent: the hand-written cluster adoptsource makes (on
// one lab) declares what TalosProxmoxCluster declares for the same nodes (on another lab, its
// `up` through the component): every node runs the same configuration, secrets and addresses
// aside; every VM has the same Proxmox configuration and the same proxmoxve inputs, but for its
// tags and VM id (and the image it was imported from). That is what lets a TalosProxmoxCluster
// with the hand-written cluster's secrets adopt it without applying anything.
func TestHandwrittenAdoptSourceMatchesTheComponent(t *testing.T) {
	t.Parallel() // its own labs (subnets 41 and 42), Pulumi homes and backends

	start := time.Now()

	compLab, comp := onAdoptLab(t, lab.Options{Subnet: 41}, "")
	if out, err := comp.Run(t.Context(), "up", "--yes", "--skip-preview"); err != nil {
		t.Fatalf("up of the component: %v\n%s", err, out)
	}

	t.Logf("the component's cluster is up after %s", time.Since(start).Round(time.Second))

	handLab, hand := onAdoptLab(t, lab.Options{Subnet: 42}, "")
	handDir := filepath.Join(t.TempDir(), "adopt-source")
	src := adoptSource(t, handLab, hand, handDir)

	t.Logf("the hand-written cluster is up after %s", time.Since(start).Round(time.Second))

	adoptProofKept(t, src.Kubeconfig)

	// The counters adoptSource hands over: the hand-written cluster's own creates and applies.
	if c := src.Counts; c.VMCreates != 3 || c.VMDeletes != 0 {
		t.Errorf("the hand-written cluster's up made %d VM creates and %d deletes, want 3 and 0", c.VMCreates, c.VMDeletes)
	}

	for name := range adoptNodes {
		if src.Counts.Applies[name] < 1 || src.Counts.DryRunApplies[name] != 0 || src.BootIDs[name] == "" {
			t.Errorf("node %s: %d applies, %d dry runs, boot id %q after the hand-written up", name,
				src.Counts.Applies[name], src.Counts.DryRunApplies[name], src.BootIDs[name])
		}
	}

	compNodes := compLab.Controller.Nodes()
	handNodes := handLab.Controller.Nodes()

	for _, name := range slices.Sorted(maps.Keys(adoptNodes)) {
		ip := adoptNodes[name].address

		c, h := nodeAt(compNodes, compLab.Address(ip)), handNodes[src.VMIDs[name]]
		if c == nil || h == nil || c.Config() == nil || h.Config() == nil {
			t.Fatalf("node %s: no configuration to compare (component's node %v, hand-written's %v)", name, c != nil, h != nil)
		}

		sameSecrets(t, name, h.Config(), src.MachineSecrets)

		want, got := comparableConfig(t, compLab, c.Config()), comparableConfig(t, handLab, h.Config())
		if want != got {
			t.Errorf("node %s: the hand-written configuration differs from the component's:\n%s", name, lineDiff(want, got))
		}

		wantVM, gotVM := comparableVM(compLab, name), comparableVM(handLab, name)
		if d := mapDiff(wantVM, gotVM, "tags"); d != "" {
			t.Errorf("node %s: the hand-written VM's Proxmox configuration differs from the component's:\n%s", name, d)
		}

		if !strings.Contains(gotVM["tags"], "talos") || strings.Contains(gotVM["tags"], "talos-i-") {
			t.Errorf("node %s: the hand-written VM's tags are %q, want the module's own", name, gotVM["tags"])
		}
	}

	// The proxmoxve inputs: what an import into the component compares with its declaration.
	compInputs := vmInputs(t, compLab, comp, "adopt-")
	handInputs := vmInputs(t, handLab, &lab.Pulumi{Bin: hand.Bin, Dir: handDir, Env: hand.Env}, "talos-")
	for _, name := range slices.Sorted(maps.Keys(adoptNodes)) {
		if len(compInputs[name]) == 0 || len(handInputs[name]) == 0 {
			t.Fatalf("node %s: no VM inputs to compare in the stacks (component's %d, hand-written's %d)", name, len(compInputs[name]), len(handInputs[name]))
		}

		if d := mapDiff(compInputs[name], handInputs[name], "tags", "vmId", "disks[0].importFrom"); d != "" {
			t.Errorf("node %s: the hand-written VM's inputs differ from the component's:\n%s", name, d)
		}
	}

	t.Logf("compared after %s", time.Since(start).Round(time.Second))
}

// onAdoptLab starts a lab with opts and the component program adoptComponentProgram(l,
// properties) as stack "lab" in a new Pulumi environment, with the Cilium manifest in its config.
func onAdoptLab(t *testing.T, opts lab.Options, properties string) (*lab.Lab, *lab.Pulumi) {
	t.Helper()

	l, p := onLab(t, newEnv(t), opts, func(l *lab.Lab) string { return adoptComponentProgram(l, properties) })
	if err := p.SetConfig(t.Context(), map[string]lab.ConfigValue{"ciliumManifest": {Value: adoptCiliumManifest(t)}}); err != nil {
		t.Fatal(err)
	}

	return l, p
}

// sameSecrets fails the test unless machineSecrets (the talos provider's JSON) holds the OS CA and
// the cluster id of the node configuration cfg: the bundle an adoption is given is the cluster's.
func sameSecrets(t *testing.T, node string, cfg []byte, machineSecrets string) {
	t.Helper()

	var bundle struct {
		Certs struct {
			OS struct {
				Cert string `json:"cert"`
			} `json:"os"`
		} `json:"certs"`
		Cluster struct {
			ID string `json:"id"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal([]byte(machineSecrets), &bundle); err != nil {
		t.Fatalf("the machineSecrets output is not JSON: %v", err)
	}

	var doc struct {
		Machine struct {
			CA struct {
				Crt string `yaml:"crt"`
			} `yaml:"ca"`
		} `yaml:"machine"`
		Cluster struct {
			ID string `yaml:"id"`
		} `yaml:"cluster"`
	}
	if err := yaml.Unmarshal(cfg, &doc); err != nil {
		t.Fatal(err)
	}

	if bundle.Certs.OS.Cert == "" || bundle.Certs.OS.Cert != doc.Machine.CA.Crt || bundle.Cluster.ID != doc.Cluster.ID {
		t.Errorf("node %s: the machineSecrets output is not the secrets of the node's configuration (OS CA or cluster id differ)", node)
	}
}

// configSecrets are the paths of a v1alpha1 configuration that hold the cluster's secrets or
// values drawn with them: they differ between two clusters that are otherwise the same.
var configSecrets = [][]string{
	{"machine", "token"}, {"machine", "ca", "crt"}, {"machine", "ca", "key"},
	{"cluster", "id"}, {"cluster", "secret"}, {"cluster", "token"},
	{"cluster", "secretboxEncryptionSecret"}, {"cluster", "aescbcEncryptionSecret"},
	{"cluster", "ca", "crt"}, {"cluster", "ca", "key"}, {"cluster", "aggregatorCA", "crt"}, {"cluster", "aggregatorCA", "key"},
	{"cluster", "serviceAccount", "key"}, {"cluster", "etcd", "ca", "crt"}, {"cluster", "etcd", "ca", "key"},
}

// comparableConfig is a node's configuration as Talos' machinery reads it, encoded again without
// comments, with the values of configSecrets masked and the lab's own addresses (its subnet, its
// Image Factory) replaced by placeholders.
func comparableConfig(t *testing.T, l *lab.Lab, raw []byte) string {
	t.Helper()

	cfg, err := configloader.NewFromBytes(raw)
	if err != nil {
		t.Fatalf("the configuration does not load: %v", err)
	}

	text, err := cfg.EncodeString(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		t.Fatal(err)
	}

	var out []string

	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			break
		}

		if doc["version"] == "v1alpha1" {
			for _, path := range configSecrets {
				maskPath(doc, path)
			}
		}

		b, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}

		out = append(out, string(b))
	}

	return labNeutral(l, strings.Join(out, "---\n"))
}

func maskPath(doc map[string]any, path []string) {
	m := doc
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}

		m = next
	}

	if v, ok := m[path[len(path)-1]].(string); ok && v != "" {
		m[path[len(path)-1]] = "<secret>"
	}
}

// labNeutral replaces what differs from one lab to the next in text: the Image Factory's address
// and the lab subnet's.
func labNeutral(l *lab.Lab, text string) string {
	u, err := url.Parse(l.Factory.URL())
	if err == nil {
		text = strings.ReplaceAll(text, u.Host, "<factory>")
	}

	subnet := strings.TrimSuffix(l.Address(0), "0")

	return strings.ReplaceAll(text, subnet, "<subnet>.")
}

var (
	vmDiskIDs = regexp.MustCompile(`vm-\d+-`)
	vmMAC     = regexp.MustCompile(`(?i)([0-9a-f]{2}:){5}[0-9a-f]{2}`)
)

// comparableVM is the Proxmox configuration of the VM named name, without what every VM draws
// afresh (its generation id, SMBIOS uuid, creation time, MAC address) and with its VM id and the
// lab's addresses replaced by placeholders.
func comparableVM(l *lab.Lab, name string) map[string]string {
	vm := vmOf(l, name)
	out := map[string]string{"node": vm.Node}

	for k, v := range vm.Config {
		switch k {
		case "vmgenid", "smbios1", "meta":
			continue
		}

		v = vmDiskIDs.ReplaceAllString(v, "vm-<id>-")
		v = vmMAC.ReplaceAllString(v, "<mac>")
		out[k] = labNeutral(l, v)
	}

	return out
}

// vmInputs are the proxmoxve inputs of the stack's VMs on l, flattened (path → JSON value, the
// lab's addresses replaced), by node name: the VM resources named prefix + node name.
func vmInputs(t *testing.T, l *lab.Lab, p *lab.Pulumi, prefix string) map[string]map[string]string {
	t.Helper()

	var state struct {
		Deployment struct {
			Resources []struct {
				URN    string         `json:"urn"`
				Type   string         `json:"type"`
				Inputs map[string]any `json:"inputs"`
			} `json:"resources"`
		} `json:"deployment"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, p, "stack", "export", "--show-secrets")), &state); err != nil {
		t.Fatal(err)
	}

	out := map[string]map[string]string{}

	for _, r := range state.Deployment.Resources {
		name := r.URN[strings.LastIndex(r.URN, "::")+2:]
		if !strings.HasSuffix(r.Type, ":VirtualMachine") || !strings.HasPrefix(name, prefix) {
			continue
		}

		flat := map[string]string{}
		flatten(flat, "", r.Inputs)

		for k, v := range flat {
			flat[k] = labNeutral(l, v)
		}

		out[strings.TrimPrefix(name, prefix)] = flat
	}

	return out
}

// flatten writes v's leaves into out as path → JSON value ("disks[0].size" → "20").
func flatten(out map[string]string, path string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if path == "" {
				flatten(out, k, e)
			} else {
				flatten(out, path+"."+k, e)
			}
		}
	case []any:
		for i, e := range x {
			flatten(out, fmt.Sprintf("%s[%d]", path, i), e)
		}
	default:
		b, _ := json.Marshal(x)
		out[path] = string(b)
	}
}

// mapDiff lists the keys whose values differ between want and got, but for those in allowed and
// below them.
func mapDiff(want, got map[string]string, allowed ...string) string {
	keys := maps.Clone(want)
	maps.Copy(keys, got)

	var lines []string

	for _, k := range slices.Sorted(maps.Keys(keys)) {
		w, inW := want[k]
		g, inG := got[k]

		if slices.ContainsFunc(allowed, func(a string) bool { return k == a || strings.HasPrefix(k, a+"[") || strings.HasPrefix(k, a+".") }) ||
			(inW == inG && w == g) {
			continue
		}

		lines = append(lines, fmt.Sprintf("  %s: component %s, hand-written %s", k, present(w, inW), present(g, inG)))
	}

	return strings.Join(lines, "\n")
}

func present(v string, ok bool) string {
	if !ok {
		return "(none)"
	}

	return fmt.Sprintf("%q", v)
}

// lineDiff lists the lines only the first text has (-) and only the second has (+).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")

	var lines []string

	for _, l := range w {
		if !slices.Contains(g, l) {
			lines = append(lines, "- "+l)
		}
	}

	for _, l := range g {
		if !slices.Contains(w, l) {
			lines = append(lines, "+ "+l)
		}
	}

	if len(lines) == 0 {
		return "(the same lines, in another order)\n--- component:\n" + want + "\n--- hand-written:\n" + got
	}

	return strings.Join(lines, "\n")
}
